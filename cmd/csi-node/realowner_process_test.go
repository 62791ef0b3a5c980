package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// TestRealMountOwnerVolumeServesThroughPluginRestarts is the whole node data
// path: a three-replica volume (replica-host processes), the real mount
// owner (`csi-node mount-owner`), and the plugin process staging and
// publishing it from the volume context and node-stage secrets. The plugin
// is SIGKILLed and restarted while the application reads and writes.
func TestRealMountOwnerVolumeServesThroughPluginRestarts(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	cluster := proccluster.Start(t, proccluster.Options{Capacity: 1 << 30, Timing: proccluster.FastTiming})

	ownerSocket := filepath.Join(base, "owner.sock")
	owner := start(t, exec.Command(pluginBinary, "mount-owner", "--socket="+ownerSocket,
		"--state-dir="+filepath.Join(base, "owner-state"), "--node-name=node-a", "--log-level=warn"))
	// Registered after the owner so it runs before the owner is killed.
	csitest.CleanupMounts(t, base)
	poll.Until(t, 30*time.Second, "the mount owner listens", func() error {
		_, err := replicated.NewOwnerClient(ownerSocket).List(context.Background())
		return err
	})

	staging := filepath.Join(base, "kubelet", "plugins", "staging", "vol")
	target := filepath.Join(base, "kubelet", "pods", "app", "mount")
	mkdirs(t, filepath.Dir(staging), filepath.Dir(target))
	args := []string{"--driver=" + replicated.DriverName, "--state-dir=" + filepath.Join(base, "plugin-state"),
		"--kubelet-dir=" + filepath.Join(base, "kubelet"), "--mount-owner-socket=" + ownerSocket}
	socket := filepath.Join(base, "csi.sock")
	plugin, conn := startPlugin(t, socket, args...)

	ca, err := os.ReadFile(cluster.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(cluster.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	var eps []api.Endpoint
	for _, ep := range cluster.Endpoints {
		eps = append(eps, api.Endpoint{ID: ep.ID, Address: ep.Address, ServerName: ep.ServerName})
	}
	rawEps, _ := json.Marshal(eps)
	vctx := map[string]string{replicated.ContextEndpoints: string(rawEps), replicated.ContextCapacityBytes: "1073741824"}
	secrets := map[string]string{replicated.SecretCA: string(ca), replicated.SecretToken: strings.TrimSpace(string(token))}
	c := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	node := func() csi.NodeClient { return csi.NewNodeClient(conn) }
	if _, err := node().NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging,
		VolumeCapability: c, VolumeContext: vctx, Secrets: secrets}); err != nil {
		t.Fatalf("NodeStageVolume through the real mount owner: %v\n%s\nowner:\n%s", err, cluster.Logs(), owner.out)
	}
	if _, err := node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol", StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: c}); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}

	a := runApp(target)
	a.waitRounds(t, 10)
	plugin.kill(t)
	a.waitRounds(t, 10)
	_, conn = startPlugin(t, socket, args...)
	a.waitRounds(t, 10)
	if err := a.halt(); err != nil {
		t.Fatalf("the application's reads and writes on the replicated volume must continue across a plugin restart: %v", err)
	}
	t.Logf("application completed %d read/write rounds on the replicated volume across a plugin kill", a.rounds.Load())
	if _, err := node().NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol", VolumePath: target}); err != nil {
		t.Fatalf("the restarted plugin must report stats of the replicated mount: %v", err)
	}
	if _, err := node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol", TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if _, err := node().NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
	for _, p := range []string{target, staging} {
		if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, p); ok {
			t.Fatalf("after unpublish and unstage nothing may stay mounted at %s", p)
		}
	}
}
