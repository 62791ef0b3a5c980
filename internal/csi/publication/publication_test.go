package publication_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/publication"
)

func TestRecordsSurviveReopening(t *testing.T) {
	dir := t.TempDir()
	s, err := publication.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := publication.Record{VolumeID: "lv-1", TargetPath: "/consumer/lv-1", Holder: "replica-host/a", CreatedAt: time.Now().UTC()}
	if err := s.Put(rec); err != nil {
		t.Fatalf("Put: %v", err)
	}
	// A temp file left by a crash inside Put must not be taken for a record.
	if err := os.WriteFile(filepath.Join(dir, "publications", "lv-2.json.tmp"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, err := publication.OpenStore(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	got, ok := s2.Get("lv-1")
	if !ok || got.Holder != rec.Holder || got.TargetPath != rec.TargetPath {
		t.Fatalf("a record must survive reopening the store, got %+v (found %v)", got, ok)
	}
	if _, ok := s2.Get("lv-2"); ok {
		t.Fatalf("an interrupted Put must not appear as a record")
	}
	if err := s2.Delete("lv-1"); err != nil {
		t.Fatal(err)
	}
	s3, err := publication.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s3.List()) != 0 {
		t.Fatalf("a deleted record must stay deleted after reopening, got %v", s3.List())
	}
}

func TestCorruptRecordIsNeverSilentlyForgotten(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "publications"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "publications", "lv-1.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := publication.OpenStore(dir); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("opening a store with a corrupt record must fail, not free the volume; got %v", err)
	}
}

func TestRecordVolumeIDsAreBounded(t *testing.T) {
	s, err := publication.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "../escape", "a/b", strings.Repeat("x", 200), ".hidden"} {
		if err := s.Put(publication.Record{VolumeID: id}); err == nil {
			t.Errorf("a record for volume ID %q must be refused", id)
		}
	}
}

func TestPublicationLockExcludesASecondSupervisor(t *testing.T) {
	root := filepath.Join(t.TempDir(), "consumer")
	l1, err := publication.AcquireLock(root, "pid=1 state-dir=/a")
	if err != nil {
		t.Fatalf("first supervisor: %v", err)
	}
	if filepath.Dir(l1.Path()) != filepath.Dir(root) {
		t.Fatalf("the lock must live beside the consumer root, got %s", l1.Path())
	}
	_, err = publication.AcquireLock(root, "pid=2 state-dir=/b")
	if !errors.Is(err, publication.ErrLocked) || !strings.Contains(err.Error(), "pid=1 state-dir=/a") {
		t.Fatalf("a second supervisor must be refused with the holder named, got %v", err)
	}
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := publication.AcquireLock(root, "pid=2 state-dir=/b")
	if err != nil {
		t.Fatalf("after release the lock must be free: %v", err)
	}
	l2.Release()
}

func TestWaitForBindReturnsWhenTheMountAppears(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	csitest.CleanupMounts(t, base)
	target := filepath.Join(base, "bind")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- publication.WaitForBind(ctx, target) }()
	select {
	case err := <-done:
		t.Fatalf("WaitForBind must wait while nothing is mounted, returned %v", err)
	default:
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitForBind must return once the mount is visible: %v", err)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	err := publication.WaitForBind(short, filepath.Join(base, "never"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForBind must give up at the deadline with DeadlineExceeded, got %v", err)
	}
}
