package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry-%d", i))})
	}
	return out
}

func openT(t *testing.T, dir string, seg int64) (*Log, int64) {
	t.Helper()
	l, torn, err := OpenLog(dir, seg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, torn
}

// expectRange wants the journal to hold exactly the entries of entries()
// from first to last.
func expectRange(t *testing.T, l *Log, first, last uint64) {
	t.Helper()
	expectData(t, l, first, last, func(i uint64) []byte { return []byte(fmt.Sprintf("entry-%d", i)) })
}

// expectData wants the journal to hold exactly first to last, entry i with
// the data want(i).
func expectData(t *testing.T, l *Log, first, last uint64, want func(uint64) []byte) {
	t.Helper()
	f, _ := l.FirstIndex()
	la, _ := l.LastIndex()
	if f != first || la != last {
		t.Fatalf("journal holds [%d, %d], want [%d, %d]", f, la, first, last)
	}
	for i := first; i <= last; i++ {
		var lg raft.Log
		if err := l.GetLog(i, &lg); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if w := want(i); !bytes.Equal(lg.Data, w) {
			t.Fatalf("entry %d: read back %d bytes that differ from the %d written", i, len(lg.Data), len(w))
		}
	}
}

func TestJournalSurvivesReopenAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 256)
	for i := uint64(1); i <= 50; i += 10 {
		if err := l.StoreLogs(entries(i, i+9)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	l2, torn := openT(t, dir, 256)
	if torn != 0 {
		t.Fatalf("clean journal reported %d torn bytes", torn)
	}
	expectRange(t, l2, 1, 50)
	if err := l2.StoreLogs(entries(52, 52)); err == nil {
		t.Fatalf("a gap in indexes must be refused")
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	names, err := segmentNames(dir)
	if err != nil || len(names) == 0 {
		t.Fatal(err)
	}
	return filepath.Join(dir, names[len(names)-1].file())
}

func TestTornTailIsTruncatedToTheLastWholeBatch(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 1<<20)
	l.StoreLogs(entries(1, 10))
	l.StoreLogs(entries(11, 12))
	l.Close()
	p := lastSegment(t, dir)
	fi, _ := os.Stat(p)
	// Tear the last frame: its bytes are garbage, as after a crash before
	// fdatasync returned.
	fh, _ := os.OpenFile(p, os.O_WRONLY, 0)
	fh.WriteAt([]byte{1, 2, 3, 4, 5, 6, 7}, fi.Size()-7)
	fh.Close()
	l2, torn := openT(t, dir, 1<<20)
	if torn == 0 {
		t.Fatalf("a torn tail was not detected")
	}
	expectRange(t, l2, 1, 11)
	if err := l2.StoreLogs(entries(12, 12)); err != nil {
		t.Fatalf("appending after recovery: %v", err)
	}
	expectRange(t, l2, 1, 12)
}

func TestCorruptionBeforeTheTailRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 128)
	for i := uint64(1); i <= 40; i += 4 {
		l.StoreLogs(entries(i, i+3))
	}
	l.Close()
	names, _ := segmentNames(dir)
	first := filepath.Join(dir, names[0].file())
	fh, _ := os.OpenFile(first, os.O_WRONLY, 0)
	fh.WriteAt([]byte{0xFF}, 20)
	fh.Close()
	if _, _, err := OpenLog(dir, 128); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corruption in a sealed segment must refuse to open, got %v", err)
	}
}

func TestDeleteRangeTruncatesSuffixAndPrefix(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 200)
	for i := uint64(1); i <= 60; i += 5 {
		l.StoreLogs(entries(i, i+4))
	}
	if err := l.DeleteRange(41, 60); err != nil {
		t.Fatal(err)
	}
	expectRange(t, l, 1, 40)
	if err := l.DeleteRange(1, 20); err != nil {
		t.Fatal(err)
	}
	expectRange(t, l, 21, 40)
	var lg raft.Log
	if err := l.GetLog(5, &lg); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("a compacted entry must be gone, got %v", err)
	}
	l.StoreLogs(entries(41, 45))
	l.Close()
	l2, _ := openT(t, dir, 200)
	la, _ := l2.LastIndex()
	if la != 45 {
		t.Fatalf("after reopen last index %d, want 45", la)
	}
	if err := l2.DeleteRange(1, 45); err != nil {
		t.Fatal(err)
	}
	if err := l2.StoreLogs(entries(100, 101)); err != nil {
		t.Fatalf("an emptied journal must accept any next index: %v", err)
	}
}

func TestStableStoreValuesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	l, _ := openT(t, dir, 1<<20)
	if _, err := l.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("a missing key must report raft's \"not found\", got %v", err)
	}
	l.SetUint64([]byte("CurrentTerm"), 7)
	l.Close()
	l2, _ := openT(t, dir, 1<<20)
	if v, err := l2.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("term %d %v, want 7", v, err)
	}
}

func TestReadersDoNotWaitForAnAppendsFlushAndNeverSeeItBeforeIt(t *testing.T) {
	l, _ := openT(t, t.TempDir(), 1<<20)
	if err := l.StoreLogs(entries(1, 10)); err != nil {
		t.Fatal(err)
	}
	inSync, release := make(chan struct{}), make(chan struct{})
	unblock := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock) // a failing test must not leave the append (and Close) stuck
	l.syncData = func(fd int) error {
		close(inSync)
		<-release
		return unix.Fdatasync(fd)
	}
	stored := make(chan error, 1)
	go func() { stored <- l.StoreLogs(entries(11, 12)) }()
	<-inSync

	// The append's frames are written but not yet durable: replication
	// reads of earlier entries proceed, and the new ones are invisible.
	read := make(chan error, 1)
	go func() {
		var lg raft.Log
		if err := l.GetLog(10, &lg); err != nil {
			read <- err
			return
		}
		if last, _ := l.LastIndex(); last != 10 {
			read <- fmt.Errorf("last index %d published before its fdatasync returned, want 10", last)
			return
		}
		if err := l.GetLog(11, &lg); !errors.Is(err, raft.ErrLogNotFound) {
			read <- fmt.Errorf("entry 11 readable before its fdatasync returned (%v)", err)
			return
		}
		read <- nil
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetLog waited for another append's fdatasync: replication stalls behind every journal flush")
	}
	unblock()
	if err := <-stored; err != nil {
		t.Fatal(err)
	}
	var lg raft.Log
	if err := l.GetLog(12, &lg); err != nil || string(lg.Data) != "entry-12" {
		t.Fatalf("entry 12 after its append returned: %q %v", lg.Data, err)
	}
}
