package main

// Process tests: the csi-node binary is built and run as a subprocess, killed
// with SIGKILL and restarted, as a node upgrade or crash would do. The FUSE
// mount owner of the replicated tests is this test binary re-executed in
// loop-owner mode (a real go-fuse loopback mount; see loopowner).

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cellfleet/cellfleet/internal/csi/csitest/loopowner"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// loopOwnerEnv switches the test binary into mount-owner mode: its value is
// "<socket>:<data root>".
const loopOwnerEnv = "CELLFLEET_TEST_LOOP_OWNER"

var pluginBinary string

func TestMain(m *testing.M) {
	if spec := os.Getenv(loopOwnerEnv); spec != "" {
		os.Exit(runLoopOwner(spec))
	}
	var err error
	if pluginBinary, err = proccluster.Binary("github.com/cellfleet/cellfleet/cmd/csi-node"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	proccluster.RemoveBinaries()
	os.Exit(code)
}

// runLoopOwner serves a loopback mount owner until killed.
func runLoopOwner(spec string) int {
	var socket, root string
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] == ':' {
			socket, root = spec[:i], spec[i+1:]
			break
		}
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	owner := loopowner.New(root)
	defer owner.UnmountAll()
	if err := owner.Serve(ctx, lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// proc is a subprocess with its combined output.
type proc struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan error
}

// lockedBuffer is a process's output, read by a test while the process
// still writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, out: &lockedBuffer{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() { p.kill(t) })
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Errorf("process %d did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// startPlugin runs csi-node plugin and waits until its socket answers Probe.
func startPlugin(t *testing.T, socket string, args ...string) (*proc, *grpc.ClientConn) {
	t.Helper()
	p := start(t, exec.Command(pluginBinary, append([]string{"plugin", "--endpoint=unix://" + socket, "--node-id=node-a"}, args...)...))
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{})
		cancel()
		if err == nil {
			return p, conn
		}
		select {
		case exitErr := <-p.exited:
			t.Fatalf("plugin exited before serving (%v):\n%s", exitErr, p.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin did not answer Probe within 30s (%v):\n%s", err, p.out)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
