package mountowner_test

// Process tests of the mount owner: the csi-node binary runs `mount-owner`
// as a child process against a volume of three real replica-host processes,
// and is killed with SIGKILL while a mount is busy.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/mountowner"
	"github.com/cellfleet/cellfleet/internal/mountowner/api"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

var csiNodeBin string

func TestMain(m *testing.M) {
	if os.Getuid() != 0 {
		fmt.Fprintln(os.Stderr, "mount owner tests mount real FUSE filesystems and need root")
		os.Exit(1)
	}
	if spec := os.Getenv(clientEnv); spec != "" {
		os.Exit(runClient(spec))
	}
	if dir := os.Getenv(mountowner.HungServerEnv); dir != "" {
		os.Exit(mountowner.ServeHungMount(dir))
	}
	var err error
	if csiNodeBin, err = proccluster.Binary("github.com/cellfleet/cellfleet/cmd/csi-node"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	proccluster.RemoveBinaries()
	os.Exit(code)
}

// ownerProc is one mount-owner process.
type ownerProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	socket string
	client *api.Client
}

func startOwner(t *testing.T, stateDir, socket string) *ownerProc {
	t.Helper()
	cmd := exec.Command(csiNodeBin, "mount-owner", "--socket="+socket, "--state-dir="+stateDir,
		"--node-name=node-a", "--log-level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the mount owner: %v", err)
	}
	p := &ownerProc{cmd: cmd, exited: make(chan struct{}), socket: socket, client: api.NewClient(socket)}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	poll.UntilTrue(t, 30*time.Second, "the mount owner's socket answering", func() bool {
		_, err := p.client.List(context.Background())
		return err == nil
	})
	return p
}

func (p *ownerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func mountRequest(t *testing.T, c *proccluster.Cluster, target string) api.MountRequest {
	t.Helper()
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(c.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	req := api.MountRequest{VolumeID: "vol", Target: target, CAPEM: string(ca), Token: strings.TrimSpace(string(tok)),
		CapacityBytes: 1 << 30, SingleWriter: true}
	for _, ep := range c.Endpoints {
		req.Endpoints = append(req.Endpoints, api.Endpoint{ID: ep.ID, Address: ep.Address, ServerName: ep.ServerName})
	}
	return req
}

// cleanupMount detaches whatever is left at target when the test ends.
func cleanupMount(t *testing.T, target string) {
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
}

// statErr asks the filesystem at path (statfs is never answered from a
// cache, unlike stat).
func statErr(path string) error {
	var st unix.Statfs_t
	return unix.Statfs(path, &st)
}

// TestOwnerKilledWhileBusyLeavesMountTheNextStartCleans: SIGKILL of the owner
// while a writer and a process sitting in the mount keep it busy; the next
// owner start detaches the stale mount and reports it Lost; a new mount of
// the volume reads every byte that was committed before the kill.
func TestOwnerKilledWhileBusyLeavesMountTheNextStartCleans(t *testing.T) {
	c := startVolume(t)
	base := t.TempDir()
	state, socket, target := filepath.Join(base, "state"), filepath.Join(base, "owner.sock"), filepath.Join(base, "staging")
	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	cleanupMount(t, target)
	owner := startOwner(t, state, socket)
	ctx := context.Background()
	if _, err := owner.client.Mount(ctx, mountRequest(t, c, target)); err != nil {
		t.Fatalf("mount through the owner: %v", err)
	}

	// Committed data: each record is written and fsynced before it counts.
	f, err := os.OpenFile(filepath.Join(target, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var committed []byte
	for i := range 200 {
		rec := fmt.Appendf(nil, "record %04d\n", i)
		if _, err := f.Write(rec); err != nil {
			t.Fatalf("write record %d: %v", i, err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync record %d: %v", i, err)
		}
		committed = append(committed, rec...)
	}
	// Busy: a process whose working directory is the mount, and the open file.
	busy := exec.Command("sleep", "600")
	busy.Dir = target
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })

	owner.kill()
	if err := statErr(target); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after the owner's SIGKILL the mount must be stale (ENOTCONN), stat says %v", err)
	}
	f.Close()

	owner2 := startOwner(t, state, socket)
	if err := statErr(target); err != nil {
		t.Fatalf("the restarted owner must have cleaned the stale mount at %s: stat says %v", target, err)
	}
	sessions, err := owner2.client.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || sessions[0].State != api.StateLost || !strings.HasPrefix(sessions[0].Reason, "OwnerDied") {
		t.Fatalf("the restarted owner must report the dead owner's session as Lost (OwnerDied), lists %+v", sessions)
	}

	if _, err := owner2.client.Mount(ctx, mountRequest(t, c, target)); err != nil {
		t.Fatalf("mount the volume again after the owner restart: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(target, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), string(committed)) {
		t.Fatalf("a new mount must read every committed record: got %d bytes, committed %d", len(got), len(committed))
	}
	sessions, _ = owner2.client.List(ctx)
	if len(sessions) != 1 || sessions[0].State != api.StateMounted {
		t.Fatalf("after the new mount the session must be Mounted, lists %+v", sessions)
	}
	if err := owner2.client.Unmount(ctx, "vol"); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if sessions, _ = owner2.client.List(ctx); len(sessions) != 0 {
		t.Fatalf("an unmounted session must be forgotten, lists %+v", sessions)
	}
}

// clientEnv makes the test binary a socket client that asks for a mount and
// then waits to be killed: "<socket>|<request file>".
const clientEnv = "CELLFLEET_TEST_OWNER_CLIENT"

func runClient(spec string) int {
	socket, reqFile, _ := strings.Cut(spec, "|")
	b, err := os.ReadFile(reqFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var req api.MountRequest
	if err := jsonUnmarshal(b, &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = api.NewClient(socket).Mount(context.Background(), req)
	fmt.Println("mount answered:", err)
	time.Sleep(time.Hour) // killed by the test
	return 0
}

// TestKilledSocketClientNeverAffectsMount: a client killed with SIGKILL while
// its mount request is in flight, and another killed after its mount, leave
// the mount serving.
func TestKilledSocketClientNeverAffectsMount(t *testing.T) {
	c := startVolume(t)
	base := t.TempDir()
	state, socket, target := filepath.Join(base, "state"), filepath.Join(base, "owner.sock"), filepath.Join(base, "staging")
	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	cleanupMount(t, target)
	owner := startOwner(t, state, socket)
	reqFile := filepath.Join(base, "req.json")
	if err := os.WriteFile(reqFile, jsonMarshal(t, mountRequest(t, c, target)), 0o600); err != nil {
		t.Fatal(err)
	}
	client := exec.Command(os.Args[0], "-test.run=^$")
	client.Env = append(os.Environ(), clientEnv+"="+socket+"|"+reqFile)
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill the client as soon as the owner has started on its request.
	poll.UntilTrue(t, 30*time.Second, "the owner to start the client's mount", func() bool {
		_, err := os.Stat(filepath.Join(state, "sessions", "vol.json"))
		return err == nil
	})
	_ = client.Process.Kill()
	_ = client.Wait()

	ctx := context.Background()
	poll.UntilTrue(t, 60*time.Second, "the mount to complete after its client died", func() bool {
		ss, err := owner.client.List(ctx)
		return err == nil && len(ss) == 1 && ss[0].State == api.StateMounted
	})
	if err := os.WriteFile(filepath.Join(target, "after-client-death"), []byte("still serving"), 0o644); err != nil {
		t.Fatalf("the mount must serve after its socket client was killed: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(target, "after-client-death"))
	if err != nil || string(got) != "still serving" {
		t.Fatalf("read back %q, %v", got, err)
	}
	if err := owner.client.Unmount(ctx, target); err != nil {
		t.Fatalf("unmount by target: %v", err)
	}
}

// startVolume starts a 1 GiB volume of three replica-host processes.
func startVolume(t *testing.T) *proccluster.Cluster {
	t.Helper()
	return proccluster.Start(t, proccluster.Options{Capacity: 1 << 30, Timing: proccluster.FastTiming})
}
