package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// replicatedRig is a mount owner process, a plugin process and the paths of
// one staged and published volume.
type replicatedRig struct {
	base, ownerSocket, socket, staging, target string
	pluginArgs                                 []string
	owner, plugin                              *proc
	conn                                       *grpc.ClientConn
}

const rigVolume = "rv-app"

func newReplicatedRig(t *testing.T) *replicatedRig {
	t.Helper()
	csitest.RequireRoot(t)
	base := t.TempDir()
	r := &replicatedRig{base: base, ownerSocket: filepath.Join(base, "owner.sock"), socket: filepath.Join(base, "csi.sock"),
		staging: filepath.Join(base, "kubelet", "plugins", "staging", rigVolume),
		target:  filepath.Join(base, "kubelet", "pods", "app", "mount")}
	mkdirs(t, filepath.Join(base, "owner-data", rigVolume), filepath.Dir(r.staging), filepath.Dir(r.target))
	owner := exec.Command(os.Args[0], "-test.run=^$")
	owner.Env = append(os.Environ(), loopOwnerEnv+"="+r.ownerSocket+":"+filepath.Join(base, "owner-data"))
	r.owner = start(t, owner)
	// Registered after the owner so it runs before the owner is killed.
	csitest.CleanupMounts(t, base)
	poll.Until(t, 30*time.Second, "the mount owner listens", func() error {
		_, err := replicated.NewOwnerClient(r.ownerSocket).List(context.Background())
		return err
	})
	r.pluginArgs = []string{"--driver=" + replicated.DriverName, "--state-dir=" + filepath.Join(base, "state"),
		"--kubelet-dir=" + filepath.Join(base, "kubelet"), "--mount-owner-socket=" + r.ownerSocket}
	r.plugin, r.conn = startPlugin(t, r.socket, r.pluginArgs...)
	return r
}

func (r *replicatedRig) restartPlugin(t *testing.T) {
	t.Helper()
	r.plugin.kill(t)
	r.plugin, r.conn = startPlugin(t, r.socket, r.pluginArgs...)
}

func (r *replicatedRig) node() csi.NodeClient { return csi.NewNodeClient(r.conn) }

func (r *replicatedRig) stageAndPublish(t *testing.T, ctx context.Context) {
	t.Helper()
	c := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	if _, err := r.node().NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: rigVolume, StagingTargetPath: r.staging,
		VolumeCapability: c, VolumeContext: loopowner.VolumeContext(rigVolume), Secrets: loopowner.Secrets()}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := r.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: rigVolume, StagingTargetPath: r.staging,
		TargetPath: r.target, VolumeCapability: c}); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	ms, _ := mountpath.ReadMounts(mountpath.SelfMountInfo)
	for _, m := range ms {
		if m.MountPoint == r.target && m.FSType == "fuse.cellfleet" {
			return
		}
	}
	t.Fatalf("the published target must be a bind of the FUSE mount (fuse.cellfleet) at %s", r.target)
}

func (r *replicatedRig) unpublishAndUnstage(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := r.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: rigVolume, TargetPath: r.target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if _, err := r.node().NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: rigVolume, StagingTargetPath: r.staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
	for _, p := range []string{r.target, r.staging} {
		if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, p); ok {
			t.Fatalf("after unpublish and unstage nothing may stay mounted at %s", p)
		}
	}
}

// app writes, fsyncs and reads back numbered files in dir until stopped,
// counting rounds and recording the first error.
type app struct {
	rounds atomic.Int64
	mu     sync.Mutex
	err    error
	stop   chan struct{}
	done   chan struct{}
}

func runApp(dir string) *app {
	a := &app{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for i := 0; ; i++ {
			select {
			case <-a.stop:
				return
			default:
			}
			if err := a.round(dir, i); err != nil {
				a.mu.Lock()
				a.err = err
				a.mu.Unlock()
				return
			}
			a.rounds.Add(1)
		}
	}()
	return a
}

func (a *app) round(dir string, i int) error {
	name := filepath.Join(dir, fmt.Sprintf("f%03d", i%100))
	want := bytes.Repeat([]byte{byte(i)}, 4096)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("round %d: open: %w", i, err)
	}
	if _, err := f.Write(want); err != nil {
		f.Close()
		return fmt.Errorf("round %d: write: %w", i, err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("round %d: fsync/close: %w", i, err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("round %d: read: %w", i, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("round %d: read back %d bytes that differ from what was written", i, len(got))
	}
	return nil
}

func (a *app) halt() error {
	close(a.stop)
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// waitRounds waits until the app completed n more rounds, or failed.
func (a *app) waitRounds(t *testing.T, n int64) {
	t.Helper()
	target := a.rounds.Load() + n
	poll.UntilTrue(t, 60*time.Second, fmt.Sprintf("the application completes %d more read/write rounds", n), func() bool {
		a.mu.Lock()
		err := a.err
		a.mu.Unlock()
		if err != nil {
			t.Fatalf("the application's I/O must not fail: %v", err)
		}
		return a.rounds.Load() >= target
	})
}

// TestApplicationIOContinuesWhileThePluginIsKilledAndRestarted: a volume
// staged (real FUSE session in the owner process) and published through
// the plugin process keeps serving the application's writes and reads
// while the plugin is SIGKILLed and restarted; the restarted plugin
// rebuilds its state from disk and unpublishes and unstages normally.
func TestApplicationIOContinuesWhileThePluginIsKilledAndRestarted(t *testing.T) {
	r := newReplicatedRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r.stageAndPublish(t, ctx)

	a := runApp(r.target)
	a.waitRounds(t, 20)
	for i := range 2 {
		r.plugin.kill(t)
		a.waitRounds(t, 20) // no plugin at all: the mount is the owner's
		r.plugin, r.conn = startPlugin(t, r.socket, r.pluginArgs...)
		a.waitRounds(t, 20)
		stats, err := r.node().NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: rigVolume, VolumePath: r.target})
		if err != nil || len(stats.GetUsage()) == 0 {
			t.Fatalf("restart %d: the restarted plugin must know the publication from disk and report stats: %v", i+1, err)
		}
		health, err := r.node().NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: rigVolume})
		if err != nil || len(health.GetVolumeHealth().GetHealthStatuses()) != 0 {
			t.Fatalf("restart %d: a live FUSE mount must report healthy, got %v (%v)", i+1, health.GetVolumeHealth(), err)
		}
	}
	if err := a.halt(); err != nil {
		t.Fatalf("the application's reads and writes must continue without error across plugin restarts: %v", err)
	}
	t.Logf("application completed %d read/write rounds across 2 plugin kills", a.rounds.Load())
	r.unpublishAndUnstage(t, ctx)
}

// TestDeadMountOwnerIsReportedAndCleanedOnUnstage kills the mount owner:
// the FUSE mount then answers ENOTCONN, NodeGetVolumeHealth must report it
// INACCESSIBLE (MountOwnerGone), and unpublish plus unstage must clean it.
func TestDeadMountOwnerIsReportedAndCleanedOnUnstage(t *testing.T) {
	r := newReplicatedRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.stageAndPublish(t, ctx)
	if err := os.WriteFile(filepath.Join(r.target, "before"), []byte("x"), 0o644); err != nil {
		t.Fatalf("write through the mount: %v", err)
	}
	r.owner.kill(t)

	health, err := r.node().NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: rigVolume})
	if err != nil {
		t.Fatalf("NodeGetVolumeHealth: %v", err)
	}
	entries := health.GetVolumeHealth().GetHealthStatuses()
	if len(entries) != 1 || entries[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE ||
		entries[0].GetReason() != string(replicated.ReasonOwnerGone) {
		t.Fatalf("a mount whose owner died must be reported INACCESSIBLE/%s, got %v", replicated.ReasonOwnerGone, entries)
	}
	r.restartPlugin(t) // the state must also be rebuilt for a dead mount
	r.unpublishAndUnstage(t, ctx)
}
