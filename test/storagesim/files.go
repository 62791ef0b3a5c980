package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// A small file is named by its sequence and holds the payload followed by the
// payload's CRC-32C, so a read-back tells wrong data from a missing file.

func fileName(dir string, seq uint64) string {
	return filepath.Join(dir, strconv.FormatUint(seq, 10))
}

// writeFile creates the file for seq, fsyncs it and then its directory (the
// name is durable only once the directory is). The file is written under a
// temporary name and renamed so a torn create never looks like a file.
func writeFile(dir string, seq uint64, payload []byte) error {
	final := fileName(dir, seq)
	tmp := final + ".tmp"
	b := make([]byte, len(payload)+trailerLen)
	copy(b, payload)
	binary.BigEndian.PutUint32(b[len(payload):], api.Checksum(payload))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := writeAllAt(f, b, 0); err != nil {
		f.Close()
		return fmt.Errorf("file %d: %w", seq, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// readFile returns the payload checksum stored in the file, and whether the
// file is intact (its trailer matches its payload).
func readFile(dir string, seq uint64) (crc uint32, intact bool, err error) {
	b, err := os.ReadFile(fileName(dir, seq))
	if err != nil {
		return 0, false, err
	}
	if len(b) < trailerLen {
		return 0, false, nil
	}
	payload := b[:len(b)-trailerLen]
	crc = api.Checksum(payload)
	return crc, crc == binary.BigEndian.Uint32(b[len(payload):]), nil
}

// maxFileSeq is the highest sequence among the files in dir, and how many
// there are; unacknowledged temporaries are removed.
func maxFileSeq(dir string) (max uint64, n int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("read directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".tmp" {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return 0, 0, fmt.Errorf("remove the unacknowledged %s: %w", e.Name(), err)
			}
			continue
		}
		seq, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		n++
		max = maxU(max, seq)
	}
	return max, n, nil
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}
