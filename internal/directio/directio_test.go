package directio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAtGathersPartsPadsTheLastBlockAndKeepsIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := Open(path, os.O_CREATE)
	if err != nil {
		// CI's temporary directory is on ext4, which takes O_DIRECT: there
		// this test must run.
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must run this test, but the filesystem of %s refuses O_DIRECT: %v", filepath.Dir(path), err)
		}
		t.Skipf("the filesystem of %s refuses O_DIRECT: %v", filepath.Dir(path), err)
	}
	defer f.Close()
	parts := [][]byte{bytes.Repeat([]byte("a"), 3000), bytes.Repeat([]byte("b"), chunk), []byte("tail")}
	want := bytes.Join(parts, nil)
	keep := make([]byte, Block)
	n, err := WriteAt(f, Block, keep, parts...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	end := Block + len(want)
	if len(got) != int(RoundUp(int64(end))) {
		t.Fatalf("file is %d bytes, want %d (the last block completed)", len(got), RoundUp(int64(end)))
	}
	if !bytes.Equal(got[Block:end], want) || !bytes.Equal(got[end:], make([]byte, len(got)-end)) || !bytes.Equal(got[:Block], make([]byte, Block)) {
		t.Fatal("the file does not hold the parts at the offset followed by zeros")
	}
	if lastStart := int(RoundDown(int64(end))); !bytes.Equal(keep[:n], got[lastStart:end]) {
		t.Fatalf("kept %d bytes %q, want the last partial block's %d", n, keep[:n], end-lastStart)
	}
	if _, err := WriteAt(f, 100, nil, []byte("x")); err == nil {
		t.Fatal("a write at an unaligned offset must be refused")
	}
}
