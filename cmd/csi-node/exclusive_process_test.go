package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cellfleet/cellfleet/internal/csi/csitest"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
)

// TestExclusivePublicationRefusalSurvivesPluginRestart runs the local driver
// as a process: a second publisher and DeleteVolume are refused, the refusal
// survives SIGKILL and restart, an overlapping supervisor with a different
// private state root is excluded by the publication lock, and after normal
// unpublication both publication and deletion work.
func TestExclusivePublicationRefusalSurvivesPluginRestart(t *testing.T) {
	csitest.RequireRoot(t)
	base := t.TempDir()
	csitest.CleanupMounts(t, base)
	consumer := filepath.Join(base, "consumer")
	pods := filepath.Join(base, "kubelet", "pods")
	mkdirs(t, pods, consumer)
	args := []string{"--driver=" + local.DriverName, "--data-root=" + filepath.Join(base, "data"),
		"--kubelet-dir=" + filepath.Join(base, "kubelet"), "--consumer-mount-root=" + consumer}
	socket := filepath.Join(base, "csi.sock")
	stateA := "--state-dir=" + filepath.Join(base, "state-a")
	plugin, conn := startPlugin(t, socket, append(args, stateA)...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-backing-r0", VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	id := created.GetVolume().GetVolumeId()
	target := filepath.Join(consumer, "pvc-backing-r0")
	const holder = "replica-host/node-a"
	if err := publish(ctx, conn, id, target, holder); err != nil {
		t.Fatalf("exclusive publication: %v", err)
	}
	if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, target); !ok {
		t.Fatalf("the exclusive publication must be mounted at %s", target)
	}

	expectRefusals := func(conn *grpc.ClientConn, when string) {
		t.Helper()
		for what, err := range map[string]error{
			"a second exclusive publisher": publish(ctx, conn, id, filepath.Join(consumer, "second"), "replica-host/other"),
			"an ordinary publication":      publish(ctx, conn, id, filepath.Join(pods, "pod-1"), "pod-1"),
			"DeleteVolume":                 deleteVolume(ctx, conn, id),
		} {
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), holder) {
				t.Fatalf("%s %s must be refused with FAILED_PRECONDITION naming %q, got %v", what, when, holder, err)
			}
		}
	}
	expectRefusals(conn, "while exclusively published")

	plugin.kill(t)
	if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, target); !ok {
		t.Fatalf("killing the plugin must leave the exclusive publication mounted")
	}
	_, conn = startPlugin(t, socket, append(args, stateA)...)
	expectRefusals(conn, "after the plugin was killed and restarted")

	// An overlapping supervisor with its own private state root must not
	// start on the same consumer root while the first holds the lock.
	overlap := exec.CommandContext(ctx, pluginBinary, append([]string{"plugin", "--node-id=node-a",
		"--endpoint=unix://" + filepath.Join(base, "other.sock"), "--state-dir=" + filepath.Join(base, "state-b")}, args...)...)
	out, err := overlap.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "publication lock is held") || !strings.Contains(string(out), "state-a") {
		t.Fatalf("a supervisor with a different state root must be refused, naming the lock holder; exit %v, output:\n%s", err, out)
	}

	if err := unpublish(ctx, conn, id, target); err != nil {
		t.Fatalf("normal unpublication: %v", err)
	}
	if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, target); ok {
		t.Fatalf("unpublication must unmount %s", target)
	}
	if _, err := os.Stat(filepath.Join(base, "state-a", "publications", id+".json")); !os.IsNotExist(err) {
		t.Fatalf("unpublication must remove the durable record (stat: %v)", err)
	}
	podTarget := filepath.Join(pods, "pod-1")
	if err := publish(ctx, conn, id, podTarget, "pod-1"); err != nil {
		t.Fatalf("after unpublication an ordinary publication must work: %v", err)
	}
	if err := unpublish(ctx, conn, id, podTarget); err != nil {
		t.Fatalf("unpublish ordinary: %v", err)
	}
	if err := deleteVolume(ctx, conn, id); err != nil {
		t.Fatalf("after unpublication DeleteVolume must work: %v", err)
	}
}

func publish(ctx context.Context, conn *grpc.ClientConn, id, target, holder string) error {
	_, err := csi.NewNodeClient(conn).NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: id, TargetPath: target, VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
		VolumeContext: map[string]string{local.HolderContextKey: holder},
	})
	return err
}

func unpublish(ctx context.Context, conn *grpc.ClientConn, id, target string) error {
	_, err := csi.NewNodeClient(conn).NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	return err
}

func deleteVolume(ctx context.Context, conn *grpc.ClientConn, id string) error {
	_, err := csi.NewControllerClient(conn).DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	return err
}
