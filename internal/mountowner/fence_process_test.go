package mountowner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// TestSessionFencedByAnotherOwnersMountSaysSo: two mount owners (two nodes)
// mount one single-writer volume; the first owner's session records its
// epoch and, once the second mounts, says it is fenced, and its mount
// answers EIO.
func TestSessionFencedByAnotherOwnersMountSaysSo(t *testing.T) {
	c := startVolume(t)
	var owners []*ownerProc
	var targets []string
	for _, node := range []string{"a", "b"} {
		base := t.TempDir()
		target := filepath.Join(base, "staging")
		if err := os.Mkdir(target, 0o750); err != nil {
			t.Fatal(err)
		}
		cleanupMount(t, target)
		owners = append(owners, startOwner(t, filepath.Join(base, "state"), filepath.Join(base, "owner-"+node+".sock")))
		targets = append(targets, target)
	}
	ctx := context.Background()
	first, err := owners[0].client.Mount(ctx, mountRequest(t, c, targets[0]))
	if err != nil {
		t.Fatalf("mount on the first node: %v", err)
	}
	if first.FencingEpoch != 1 || strings.HasPrefix(first.Reason, "Fenced") {
		t.Fatalf("first session: epoch %d reason %q, want epoch 1 and not fenced", first.FencingEpoch, first.Reason)
	}
	second, err := owners[1].client.Mount(ctx, mountRequest(t, c, targets[1]))
	if err != nil {
		t.Fatalf("mount on the second node: %v", err)
	}
	if second.FencingEpoch != 2 {
		t.Fatalf("second session opened epoch %d, want 2", second.FencingEpoch)
	}
	poll.UntilTrue(t, time.Minute, "the first owner to report its session fenced", func() bool {
		list, err := owners[0].client.List(ctx)
		return err == nil && len(list) == 1 && list[0].State == api.StateMounted &&
			strings.HasPrefix(list[0].Reason, "Fenced:")
	})
	if err := statErr(targets[0]); !errors.Is(err, syscall.EIO) {
		t.Fatalf("the fenced mount answers statfs with %v, want EIO", err)
	}
	if err := statErr(targets[1]); err != nil {
		t.Fatalf("the newest mount answers statfs with %v", err)
	}
}
