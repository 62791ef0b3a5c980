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

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

const recordSuffix = ".json"

type records struct{ dir string }

func (r records) path(volume string) string { return filepath.Join(r.dir, volume+recordSuffix) }

// write stores s durably.
func (r records) write(s api.Session) error {
	if err := durable.WriteJSON(r.path(s.VolumeID), s); err != nil {
		return fmt.Errorf("session record of %s: %w", s.VolumeID, err)
	}
	return nil
}

// remove deletes a record durably.
func (r records) remove(volume string) error {
	if err := durable.RemoveFile(r.path(volume)); err != nil {
		return fmt.Errorf("session record of %s: %w", volume, err)
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
