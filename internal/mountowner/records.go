package mountowner

// Session records. One JSON file per volume under <state-dir>/sessions,
// written (temporary file, fsync, rename, directory fsync) BEFORE the mount
// is made and updated after, so that every mount this owner ever made is on
// disk before the kernel knows it: a restarted owner finds the mounts its
// predecessor left. Records hold no secret (no token, no CA).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

const recordSuffix = ".json"

type records struct{ dir string }

func (r records) path(volume string) string { return filepath.Join(r.dir, volume+recordSuffix) }

// write stores s durably.
func (r records) write(s api.Session) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(r.dir, "."+s.VolumeID+".*")
	if err != nil {
		return fmt.Errorf("session record of %s: %w", s.VolumeID, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("session record of %s: %w", s.VolumeID, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("session record of %s: fsync: %w", s.VolumeID, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), r.path(s.VolumeID)); err != nil {
		return fmt.Errorf("session record of %s: %w", s.VolumeID, err)
	}
	return r.syncDir()
}

// remove deletes a record durably.
func (r records) remove(volume string) error {
	if err := os.Remove(r.path(volume)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove session record of %s: %w", volume, err)
	}
	return r.syncDir()
}

func (r records) syncDir() error {
	d, err := os.Open(r.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", r.dir, err)
	}
	return nil
}

// load reads every record. An unreadable record is reported, not skipped
// silently: it names a mount that may need cleaning.
func (r records) load() ([]api.Session, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("read session records: %w", err)
	}
	var out []api.Session
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, recordSuffix) || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var s api.Session
		if err := json.Unmarshal(b, &s); err != nil {
			errs = append(errs, fmt.Errorf("session record %s: %w", name, err))
			continue
		}
		if api.ValidVolumeID(s.VolumeID) != nil || api.ValidTarget(s.Target) != nil ||
			s.VolumeID+recordSuffix != name {
			errs = append(errs, fmt.Errorf("session record %s names volume %q at %q", name, s.VolumeID, s.Target))
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}
