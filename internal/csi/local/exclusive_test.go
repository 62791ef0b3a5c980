package local_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// TestExclusivePublicationBlocksOthersUntilUnpublished walks the contract of
// docs/csi.md, "Consumer mount root: exclusive publication": publication
// beneath the consumer root is exclusive, blocks ordinary publication and
// deletion, survives a restart, and after normal unpublication everything
// works again.
func TestExclusivePublicationBlocksOthersUntilUnpublished(t *testing.T) {
	f := newFixture(t)
	id := f.create(t, "backing-r0")
	target := filepath.Join(f.consumer, "backing-r0")
	const holder = "replica-host/node-a"

	if err := f.publish(id, target, holder); err != nil {
		t.Fatalf("exclusive publication beneath the consumer root must succeed: %v", err)
	}
	if !mounted(t, target) {
		t.Fatalf("exclusive publication must bind-mount the volume at %s", target)
	}
	if err := f.publish(id, target, holder); err != nil {
		t.Fatalf("repeating the same exclusive publication must be idempotent: %v", err)
	}
	if err := os.WriteFile(filepath.Join(target, "journal"), []byte("entry"), 0o600); err != nil {
		t.Fatalf("write through the publication: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.base, "data", id, "journal")); err != nil {
		t.Fatalf("a write through the publication must land in the volume directory: %v", err)
	}

	refusals := func(when string) {
		t.Helper()
		expectCode(t, "a second exclusive publisher "+when,
			f.publish(id, filepath.Join(f.consumer, "other"), "replica-host/other"), codes.FailedPrecondition, holder, target)
		expectCode(t, "ordinary publication "+when,
			f.publish(id, filepath.Join(f.pods, "pod-1"), "pod-1"), codes.FailedPrecondition, holder)
		expectCode(t, "DeleteVolume "+when, f.delete(id), codes.FailedPrecondition, holder)
		if _, err := os.Stat(filepath.Join(f.pods, "pod-1")); err == nil && mounted(t, filepath.Join(f.pods, "pod-1")) {
			t.Fatalf("a refused ordinary publication must not mount anything")
		}
	}
	refusals("while exclusively published")
	f.restart(t)
	refusals("after a plugin restart")

	if err := f.unpublish(id, target); err != nil {
		t.Fatalf("normal unpublication must succeed: %v", err)
	}
	if mounted(t, target) {
		t.Fatalf("unpublication must unmount %s", target)
	}
	if err := f.unpublish(id, target); err != nil {
		t.Fatalf("repeating unpublication must be idempotent: %v", err)
	}
	podTarget := filepath.Join(f.pods, "pod-1")
	if err := f.publish(id, podTarget, "pod-1"); err != nil {
		t.Fatalf("after unpublication, ordinary publication must work: %v", err)
	}
	expectCode(t, "exclusive publication while an ordinary publication survives",
		f.publish(id, target, holder), codes.FailedPrecondition, podTarget)
	if err := f.unpublish(id, podTarget); err != nil {
		t.Fatalf("unpublish ordinary: %v", err)
	}
	if err := f.delete(id); err != nil {
		t.Fatalf("after unpublication, DeleteVolume must work: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.base, "data", id)); !os.IsNotExist(err) {
		t.Fatalf("DeleteVolume must remove the volume directory, stat says %v", err)
	}
}

// TestExclusiveRecordIsWrittenBeforeTheMount injects a mount failure after
// the record is written (the volume's directory vanished): the record
// must already be durable and keep blocking others, as after a crash
// between record and mount, until a normal unpublication clears it.
func TestExclusiveRecordIsWrittenBeforeTheMount(t *testing.T) {
	f := newFixture(t)
	id := f.create(t, "backing-r1")
	target := filepath.Join(f.consumer, "backing-r1")
	if err := os.RemoveAll(filepath.Join(f.base, "data", id)); err != nil {
		t.Fatal(err)
	}

	if err := f.publish(id, target, "replica-host/node-a"); err == nil {
		t.Fatalf("publication of a volume whose directory vanished must fail")
	}
	if mounted(t, target) {
		t.Fatalf("a failed publication must not leave a mount")
	}
	raw, err := os.ReadFile(filepath.Join(f.base, "state", "publications", id+".json"))
	if err != nil {
		t.Fatalf("the publication record must be on disk before the mount is attempted: %v", err)
	}
	if len(raw) == 0 {
		t.Fatalf("the publication record must not be empty")
	}
	f.restart(t)
	expectCode(t, "DeleteVolume after an interrupted exclusive publication", f.delete(id), codes.FailedPrecondition, "replica-host/node-a")
	if err := f.unpublish(id, target); err != nil {
		t.Fatalf("normal unpublication must clear an interrupted publication: %v", err)
	}
	if err := f.delete(id); err != nil {
		t.Fatalf("DeleteVolume after the record is cleared: %v", err)
	}
}

// TestExclusivePublicationRefusedWhileAnUnknownMountSurvives: a bind of
// the volume this plugin's state does not know (left by a predecessor with
// another state root) must block exclusive acquisition until it is gone.
func TestExclusivePublicationRefusedWhileAnUnknownMountSurvives(t *testing.T) {
	f := newFixture(t)
	id := f.create(t, "backing-r2")
	stray := filepath.Join(f.base, "kubelet", "stray")
	mkdir(t, stray)
	if err := unix.Mount(filepath.Join(f.base, "data", id), stray, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind the volume behind the plugin's back: %v", err)
	}
	target := filepath.Join(f.consumer, "backing-r2")
	expectCode(t, "exclusive publication while another mount of the volume survives",
		f.publish(id, target, "replica-host/node-a"), codes.FailedPrecondition, stray)
	if _, err := os.Stat(filepath.Join(f.base, "state", "publications", id+".json")); !os.IsNotExist(err) {
		t.Fatalf("a refused acquisition must not write a publication record (stat: %v)", err)
	}
	if err := unix.Unmount(stray, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.publish(id, target, "replica-host/node-a"); err != nil {
		t.Fatalf("once the other mount is gone, exclusive publication must work: %v", err)
	}
	if err := f.unpublish(id, target); err != nil {
		t.Fatal(err)
	}
}
