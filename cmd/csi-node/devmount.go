package main

// `csi-node mount`: a development command that mounts a replicated volume in
// the foreground from the client configuration `replica-host
// init-standalone` writes, with no Kubernetes and no mount owner, and
// unmounts it on SIGINT or SIGTERM.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/fuse"
	"github.com/cellfleet/cellfleet/internal/replica/client"
)

func runDevMount(args []string) error {
	fs := flag.NewFlagSet("csi-node mount", flag.ContinueOnError)
	cfgPath := fs.String("client-config", "", "client configuration (client.json from replica-host init-standalone)")
	target := fs.String("target", "", "existing directory to mount on")
	single := fs.Bool("single-writer", true, "cache attributes, names and pages (only one mount writes the volume)")
	ro := fs.Bool("read-only", false, "mount read-only")
	debug := fs.Bool("debug", false, "log every FUSE request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cfgPath == "" || *target == "" || fs.NArg() > 0 {
		return errors.New("usage: csi-node mount --client-config FILE --target DIR [--single-writer] [--read-only]")
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := client.LoadFile(*cfgPath)
	if err != nil {
		return err
	}
	cfg.Logger = log
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to volume %s: %w", cfg.Volume, err)
	}
	m, err := fuse.MountVolume(ctx, *target, cl, fuse.Options{Volume: cfg.Volume, SingleWriter: *single,
		ReadOnly: *ro, Debug: *debug, Logger: log})
	if err != nil {
		cl.Close()
		return err
	}
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-sig.Done():
	case <-m.Done():
		return errors.New("the mount ended")
	}
	uctx, ucancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ucancel()
	return m.Unmount(uctx)
}
