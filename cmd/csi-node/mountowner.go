package main

// `csi-node mount-owner`: the long-lived process that holds the node's FUSE
// sessions of replicated volumes and serves the mount owner protocol
// (internal/mountowner/api) on a unix socket. It runs as its own container
// so that restarting the CSI plugin never touches a mount. See docs/fuse.md.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/mountowner"
)

type mountOwnerFlags struct {
	socket       string
	stateDir     string
	nodeName     string
	mountTimeout time.Duration
	logLevel     slog.Level
}

func parseMountOwnerFlags(args []string) (*mountOwnerFlags, error) {
	fs := flag.NewFlagSet("csi-node mount-owner", flag.ContinueOnError)
	f := &mountOwnerFlags{}
	var level string
	host, _ := os.Hostname()
	if n := os.Getenv("NODE_NAME"); n != "" {
		host = n
	}
	fs.StringVar(&f.socket, "socket", "/run/cellfleet/mount-owner.sock", "unix socket to serve the mount owner protocol on (mode 0600)")
	fs.StringVar(&f.stateDir, "state-dir", "/var/lib/cellfleet/mount-owner", "persistent directory for session records (must survive restarts)")
	fs.StringVar(&f.nodeName, "node-name", host, "this node's name (keys the mounts' orphan files; default $NODE_NAME or the host name)")
	fs.DurationVar(&f.mountTimeout, "mount-timeout", 60*time.Second, "bound on connecting to a volume and mounting it (1s to 10m)")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	for name, p := range map[string]string{"socket": f.socket, "state-dir": f.stateDir} {
		if p == "" || !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("--%s=%q must be an absolute path", name, p))
		}
	}
	if f.nodeName == "" || len(f.nodeName) > 253 {
		errs = append(errs, fmt.Errorf("--node-name=%q must be 1 to 253 characters", f.nodeName))
	}
	if f.mountTimeout < time.Second || f.mountTimeout > 10*time.Minute {
		errs = append(errs, fmt.Errorf("--mount-timeout=%s must be between 1s and 10m", f.mountTimeout))
	}
	if err := f.logLevel.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level=%q: %w", level, err))
	}
	return f, errors.Join(errs...)
}

// runMountOwner serves until SIGTERM or SIGINT. Its mounts end with the
// process; the next start reports and cleans them (docs/fuse.md).
func runMountOwner(args []string) error {
	f, err := parseMountOwnerFlags(args)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: f.logLevel}))
	slog.SetDefault(log)
	if err := os.MkdirAll(filepath.Dir(f.socket), 0o755); err != nil {
		return err
	}
	owner, err := mountowner.New(mountowner.Config{StateDir: f.stateDir, NodeName: f.nodeName,
		MountTimeout: f.mountTimeout, Logger: log})
	if err != nil {
		return err
	}
	defer owner.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return owner.Serve(ctx, f.socket)
}
