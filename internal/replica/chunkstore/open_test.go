package chunkstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/durable"
)

// twoManifests leaves a store whose older manifest holds old and newer
// one holds fresh, in file 9's first two chunks, plus an unpersisted
// write; it returns the directory and both manifests.
func twoManifests(t *testing.T) (dir string, older, newer *Manifest, old, fresh []byte) {
	dir = t.TempDir()
	s := open(t, dir, Options{})
	old, fresh = fill(2*testChunk, 1), fill(2*testChunk, 2)
	write(t, s, 9, old, 0)
	older = persist(t, s, 10)
	write(t, s, 9, fresh, 0)
	newer = persist(t, s, 20)
	write(t, s, 9, fill(100, 3), 0) // the journal tail's business
	write(t, s, 11, fill(100, 3), 0)
	s.Close()
	return dir, older, newer, old, fresh
}

func TestOpenRestoresTheNewestManifestWithoutTheWritesAfterIt(t *testing.T) {
	dir, _, newer, _, fresh := twoManifests(t)
	s := open(t, dir, Options{})
	if !bytes.Equal(read(t, s, 9, 0, 2*testChunk), fresh) {
		t.Fatal("open did not restore the newest manifest's bytes")
	}
	if !bytes.Equal(read(t, s, 11, 0, 100), make([]byte, 100)) {
		t.Fatal("a file written after the newest manifest has data after open")
	}
	if ids := s.Manifests(); len(ids) != 2 || ids[1] != newer.ID {
		t.Fatalf("kept manifests %v", ids)
	}
	if got, want := chunkFiles(t, dir), referenced(s); names(got) != names(want) {
		t.Fatalf("open left unreferenced chunks: on disk %v, referenced %v", got, want)
	}
	// The restored chunks are sealed: a write makes a new version.
	write(t, s, 9, fill(10, 4), 0)
	if st := s.Stats(); st.Copied+st.Cloned != 1 {
		t.Fatal("a restored chunk was written in place")
	}
}

func TestOpenIgnoresATornOrCorruptNewerManifest(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, s string, newer *Manifest)
	}{
		{"truncated", func(t *testing.T, path string, _ *Manifest) {
			if err := os.Truncate(path, 40); err != nil {
				t.Fatal(err)
			}
		}},
		{"a flipped byte", func(t *testing.T, path string, _ *Manifest) { flipByte(t, path, 60) }},
		{"empty", func(t *testing.T, path string, _ *Manifest) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"a named chunk missing", func(t *testing.T, path string, m *Manifest) {
			e := m.Entries[1]
			chunk := filepath.Join(filepath.Dir(filepath.Dir(path)), chunksDir, hex(e.Ino), hex(e.Index)+"."+hex(e.Version))
			if err := os.Remove(chunk); err != nil {
				t.Fatal(err)
			}
		}},
		{"a named chunk cut short", func(t *testing.T, path string, m *Manifest) {
			e := m.Entries[0]
			chunk := filepath.Join(filepath.Dir(filepath.Dir(path)), chunksDir, hex(e.Ino), hex(e.Index)+"."+hex(e.Version))
			if err := os.Truncate(chunk, 5); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, older, newer, old, _ := twoManifests(t)
			path := filepath.Join(dir, manifestsDir, filepath.Base((&Store{dir: dir}).manifestPath(newer.ID)))
			tc.damage(t, path, newer)
			s := open(t, dir, Options{})
			if !bytes.Equal(read(t, s, 9, 0, 2*testChunk), old) {
				t.Fatal("open did not fall back to the older manifest")
			}
			if ids := s.Manifests(); len(ids) != 1 || ids[0] != older.ID {
				t.Fatalf("kept manifests %v, want only %d", ids, older.ID)
			}
			if r := s.Refused(); len(r) != 1 || !errors.Is(r[0], ErrCorrupt) {
				t.Fatalf("refused %v, want the newer manifest as corrupt", r)
			}
			if got, want := chunkFiles(t, dir), referenced(s); names(got) != names(want) {
				t.Fatalf("chunks only the refused manifest named were left: %v, want %v", got, want)
			}
			// New chunks never take the names the refused manifest used.
			write(t, s, 9, fill(testChunk, 5), 0)
			persist(t, s, 30)
		})
	}
}

func TestOpenRemovesAnInterruptedManifestWrite(t *testing.T) {
	dir, _, newer, _, fresh := twoManifests(t)
	tmp := (&Store{dir: dir}).manifestPath(newer.ID+5) + durable.TempSuffix
	if err := os.WriteFile(tmp, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	if !bytes.Equal(read(t, s, 9, 0, 2*testChunk), fresh) {
		t.Fatal("an interrupted manifest write changed what open restores")
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the interrupted write's file is left: %v", err)
	}
}

func TestOpenRefusesAnUnknownFormatNamingIt(t *testing.T) {
	cases := map[string]string{
		"a newer format":  "cellfleet chunk store 2\nchunk size 1048576\n",
		"another program": "something else\n",
		"a bad size":      "cellfleet chunk store 1\nchunk size 1000\n",
		"empty":           "",
	}
	for name, marker := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, formatFile), []byte(marker), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("open of a store marked %q: %v, want ErrFormat", marker, err)
			}
			first, _, _ := strings.Cut(marker, "\n")
			if first != "" && !strings.Contains(err.Error(), first) && !strings.Contains(err.Error(), "1000") {
				t.Fatalf("the error does not name the format: %v", err)
			}
		})
	}
}

func TestOpenRefusesADifferentChunkSizeAndStrayFiles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{ChunkSize: testChunk})
	write(t, s, 1, fill(10, 1), 0)
	persist(t, s, 1)
	s.Close()
	if _, err := Open(dir, Options{ChunkSize: 2 * testChunk}); !errors.Is(err, ErrFormat) {
		t.Fatalf("open with another chunk size: %v", err)
	}
	if s, err := Open(dir, Options{}); err != nil || s.ChunkSize() != testChunk {
		t.Fatalf("open with the recorded chunk size: %v", err)
	} else {
		s.Close()
	}
	stray := filepath.Join(dir, chunksDir, "1", "notachunk")
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "notachunk") {
		t.Fatalf("open with a stray file in a chunk directory: %v", err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatal("open removed a file it does not own")
	}
}

func TestOpenRefusesManifestsWithoutAFormatMarker(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	write(t, s, 1, fill(10, 1), 0)
	persist(t, s, 1)
	s.Close()
	if err := os.Remove(filepath.Join(dir, formatFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrFormat) {
		t.Fatalf("open of manifests without a marker: %v", err)
	}
}

func TestResetEmptiesTheLiveStateAndKeepsTheManifests(t *testing.T) {
	dir, _, newer, _, fresh := twoManifests(t)
	s := open(t, dir, Options{})
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, s, 9, 0, 2*testChunk), make([]byte, 2*testChunk)) {
		t.Fatal("a reset store still holds data")
	}
	if err := s.Restore(newer.ID); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, s, 9, 0, 2*testChunk), fresh) {
		t.Fatal("the newest manifest does not restore after a reset")
	}
}
