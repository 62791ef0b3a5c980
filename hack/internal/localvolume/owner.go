package localvolume

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/mountowner/api"
)

// Owner is the csi-node mount owner and the volume's single-writer mount
// it serves at Target. Its socket, state and log live in Dir.
type Owner struct {
	Dir, Bin, Target string
	ClientFile       string // the volume's client.json
	Capacity         uint64 // bytes the mount reports
	Node             string // the owner's --node-name

	cmd     *exec.Cmd
	oc      *api.Client
	volume  string
	mounted bool
}

// Socket is the owner's unix socket.
func (o *Owner) Socket() string { return filepath.Join(o.Dir, "owner.sock") }

// PID is the running owner's process, 0 when none runs.
func (o *Owner) PID() int {
	if o.cmd == nil {
		return 0
	}
	return o.cmd.Process.Pid
}

// Start starts a mount owner on the state directory and waits for it to
// answer. An owner started after a dead one finds its session record and
// detaches its stale mount (internal/mountowner, recover).
func (o *Owner) Start(ctx context.Context) error {
	cmd, err := Start(o.Dir, "mount-owner", filepath.Join(o.Bin, "csi-node"), "mount-owner", "--socket="+o.Socket(),
		"--state-dir="+filepath.Join(o.Dir, "owner"), "--node-name="+o.Node, "--log-level=warn")
	if err != nil {
		return err
	}
	o.cmd = cmd
	o.oc = api.NewClient(o.Socket())
	// Each ask has its own deadline: a socket whose owner is stuck in the
	// kernel accepts a connection and never answers.
	answers := func() bool {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := o.oc.List(actx)
		return err == nil
	}
	if err := WaitFor(ctx, 30*time.Second, answers); err != nil {
		return fmt.Errorf("mount owner did not answer: %w", err)
	}
	return nil
}

// Mount asks the owner for the single-writer mount at Target.
func (o *Owner) Mount(ctx context.Context) error {
	if err := os.MkdirAll(o.Target, 0o755); err != nil {
		return err
	}
	req, err := MountRequest(o.ClientFile, o.Target, o.Capacity)
	if err != nil {
		return err
	}
	o.volume = req.VolumeID
	mctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if _, err := o.oc.Mount(mctx, req); err != nil {
		return fmt.Errorf("mount through the owner: %w", err)
	}
	o.mounted = true
	return nil
}

// Kill sends SIGKILL to the owner (the mount answers ENOTCONN from then on)
// and reports whether it exited within ExitWait. One that did not has a
// thread stuck in the kernel holding its FUSE connection open; the next
// owner aborts that connection (internal/mountowner/abort.go), and then it
// exits.
func (o *Owner) Kill() (exited bool) {
	exited = true
	if o.cmd != nil {
		_ = o.cmd.Process.Signal(syscall.SIGKILL)
		done := make(chan struct{})
		go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(done) }(o.cmd)
		select {
		case <-done:
		case <-time.After(ExitWait):
			exited = false
		}
		o.cmd = nil
	}
	o.mounted = false
	return exited
}

// ExitWait bounds the wait for a killed mount owner to exit.
const ExitWait = 10 * time.Second

// Restart recovers from a dead owner as a node would: a new owner on the
// same state directory (it cleans the stale mount), then the mount again,
// retried while the volume may have no quorum.
func (o *Owner) Restart(ctx context.Context) error {
	if err := o.Start(ctx); err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if last = o.Mount(ctx); last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(2 * time.Second) // the volume may be between coordinators
	}
	return last
}

// Stop unmounts through the owner (then lazily, whatever it answered) and
// stops the owner, with SIGKILL after 20 s.
func (o *Owner) Stop() {
	if o.mounted && o.oc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := o.oc.Unmount(ctx, o.volume); err != nil {
			fmt.Fprintln(os.Stderr, "unmount through the owner:", err)
		}
		cancel()
	}
	if o.Target != "" {
		_ = unix.Unmount(o.Target, unix.MNT_DETACH)
	}
	if o.cmd != nil {
		_ = o.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = o.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = o.cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
		o.cmd = nil
	}
	o.mounted = false
}
