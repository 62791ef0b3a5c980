package main

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
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// owner is the csi-node mount owner and the volume's single-writer mount
// it serves at target.
type owner struct {
	dir, bin, target string
	clientFile       string
	cmd              *exec.Cmd
	oc               *api.Client
	mounted          bool
}

func (o *owner) socket() string { return filepath.Join(o.dir, "owner.sock") }

// start starts a mount owner on the same state directory: a restarted
// owner finds the dead one's session record and detaches its stale mount,
// which is how a killed owner is recovered (mountowner.Owner.recover).
func (o *owner) start(ctx context.Context) error {
	cmd, err := startLogged(o.dir, "mount-owner", filepath.Join(o.bin, "csi-node"), "mount-owner", "--socket="+o.socket(),
		"--state-dir="+filepath.Join(o.dir, "owner"), "--node-name=chaos-node", "--log-level=warn")
	if err != nil {
		return err
	}
	o.cmd = cmd
	o.oc = api.NewClient(o.socket())
	if err := waitFor(ctx, 30*time.Second, func() bool { _, err := o.oc.List(ctx); return err == nil }); err != nil {
		return fmt.Errorf("mount owner did not answer: %w", err)
	}
	return nil
}

// mount asks the owner for the demo's mount: single-writer, so
// write-behind and create-behind are on.
func (o *owner) mount(ctx context.Context) error {
	req, err := mountRequest(o.clientFile, o.target)
	if err != nil {
		return err
	}
	mctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if _, err := o.oc.Mount(mctx, req); err != nil {
		return fmt.Errorf("mount through the owner: %w", err)
	}
	o.mounted = true
	return nil
}

// kill sends SIGKILL to the owner: the mount answers ENOTCONN from then on.
func (o *owner) kill() {
	if o.cmd != nil {
		_ = o.cmd.Process.Signal(syscall.SIGKILL)
		exited := make(chan struct{})
		go func(cmd *exec.Cmd) { _ = cmd.Wait(); close(exited) }(o.cmd)
		select {
		case <-exited:
		case <-time.After(ownerExitWait):
			// A thread of it is stuck in the kernel where a kill cannot
			// reach it, holding its FUSE connection open (a cache
			// invalidation waiting on a directory lock that a request to
			// this same owner holds). The next owner aborts that
			// connection (internal/mountowner/abort.go), and then it exits.
			say("mount owner (pid %d) did not exit %v after SIGKILL: the next owner aborts its FUSE connection", o.cmd.Process.Pid, ownerExitWait)
		}
		o.cmd = nil
	}
	o.mounted = false
}

// ownerExitWait bounds the wait for a killed mount owner to exit.
const ownerExitWait = 10 * time.Second

// restart recovers from a dead owner as a node would: a new owner on the
// same state directory (it cleans the stale mount), then the mount again.
// The mount is retried: the volume may have no quorum at that moment.
func (o *owner) restart(ctx context.Context) error {
	o.kill()
	if err := o.start(ctx); err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if last = o.mount(ctx); last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(2 * time.Second) // the volume may be between coordinators
	}
	return last
}

// stop unmounts through the owner (falling back to a lazy unmount) and
// stops the owner.
func (o *owner) stop() {
	if o.mounted && o.oc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := o.oc.Unmount(ctx, "chaos"); err != nil {
			fmt.Fprintln(os.Stderr, "unmount through the owner:", err)
		}
		cancel()
	}
	if o.target != "" {
		_ = unix.Unmount(o.target, unix.MNT_DETACH)
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

func mountRequest(clientFile, target string) (api.MountRequest, error) {
	f, err := client.LoadFile(clientFile)
	if err != nil {
		return api.MountRequest{}, err
	}
	ca, err := os.ReadFile(filepath.Join(filepath.Dir(clientFile), "ca.crt"))
	if err != nil {
		return api.MountRequest{}, err
	}
	req := api.MountRequest{VolumeID: f.Volume, Target: target, CAPEM: string(ca), Token: f.Token,
		CapacityBytes: 4 << 30, SingleWriter: true}
	for _, ep := range f.Endpoints {
		req.Endpoints = append(req.Endpoints, api.Endpoint{ID: ep.ID, Address: ep.Address, ServerName: ep.ServerName})
	}
	return req, nil
}
