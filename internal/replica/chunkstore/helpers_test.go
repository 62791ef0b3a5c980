package chunkstore

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// testChunk is small enough to make chunk boundaries cheap to cross and
// large enough to hold several verified blocks.
const testChunk = 4 * BlockSize

func open(t testing.TB, dir string, opt Options) *Store {
	t.Helper()
	if opt.ChunkSize == 0 {
		opt.ChunkSize = testChunk
	}
	s, err := Open(dir, opt)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func write(t testing.TB, s *Store, ino uint64, data []byte, off uint64) {
	t.Helper()
	if err := s.WriteAt(ino, data, off); err != nil {
		t.Fatalf("write inode %d at %d: %v", ino, off, err)
	}
}

func read(t testing.TB, s *Store, ino, off, n uint64) []byte {
	t.Helper()
	p := make([]byte, n)
	if err := s.ReadAt(ino, p, off); err != nil {
		t.Fatalf("read inode %d at %d+%d: %v", ino, off, n, err)
	}
	return p
}

func persist(t testing.TB, s *Store, index uint64) *Manifest {
	t.Helper()
	c := s.Capture(index)
	defer c.Release()
	m, err := s.Persist(c)
	if err != nil {
		t.Fatalf("persist: %v", err)
	}
	return m
}

// fill returns n bytes that differ with seed.
func fill(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7) + byte(i>>9)
	}
	return p
}

// chunkFiles lists the chunk files on disk as "ino/index.version".
func chunkFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dir, chunksDir)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatalf("walk chunks: %v", err)
	}
	sort.Strings(out)
	return out
}

// referenced lists the chunk files the live maps and the kept manifests
// name, as chunkFiles does.
func referenced(s *Store) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for k := range s.roots() {
		rel, _ := filepath.Rel(filepath.Join(s.dir, chunksDir), s.chunkPath(k))
		out = append(out, rel)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func names(ss []string) string { return strings.Join(ss, " ") }
