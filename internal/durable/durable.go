// Package durable is the one place that writes a file so that a crash at
// any instant leaves either the old or the new content, never a torn file:
// write a temporary file beside it, fsync it, rename it over the old one,
// fsync the directory. Every record that a replica, a host, the mount owner
// or the CSI plugin relies on after a restart goes through here, so the
// power-cut rule is written (and tested) once.
//
// The temporary file is always path+".tmp": a reader that lists the
// directory can recognise an interrupted write by that suffix, and a caller
// must hold its own lock so that two writers never share one path.
//
// durable must never import anything of this module: it is a leaf that
// every storage package may use.
package durable

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// TempSuffix names the temporary file of a write in progress (path+TempSuffix).
const TempSuffix = ".tmp"

// WriteFile replaces path with data atomically and durably. The temporary
// file is removed when the write fails after creating it; one that cannot be
// created (say, a directory stands in its place) is left for the caller to see.
func WriteFile(path string, data []byte) error {
	tmp := path + TempSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := writeSyncClose(f, data); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return SyncDir(filepath.Dir(path))
}

func writeSyncClose(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return nil
}

// SyncDir makes a directory's entries (a rename, a removal, a new
// subdirectory) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and its missing parents durably: each new directory's
// entry is fsynced in its parent, so a power cut cannot take away a directory
// whose contents were synced (a replica's data directory lost that way came
// back with an empty journal in a nemesis run, docs/qualification.md).
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("create directory %s: a file is in the way", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return SyncDir(parent)
}

// RemoveFile deletes path durably; a missing file is not an error.
func RemoveFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// WriteJSON encodes v and writes it with WriteFile.
func WriteJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFile(path, raw)
}

// ReadJSON decodes path into v. A missing file is not an error: it reports
// found=false and leaves v untouched, which is a fresh plugin's state. A file
// that does not decode is an error, never silently an empty state.
func ReadJSON(path string, v any) (found bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("%s is corrupt: %w", path, err)
	}
	return true, nil
}
