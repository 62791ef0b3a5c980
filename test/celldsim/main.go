// Command celldsim is a test fixture for the fleet operator's qualification:
// a small program that honours the celld runtime contract
// (docs/fleet-operator.md, "Profiles") so the operator can be exercised on a
// real cluster under write load. It is NOT a celld and implements none of
// celld's data model; see docs/local-cluster.md.
//
// Configuration is celld's environment:
//
//	CELLD_NODE               member name (Pod name, or Pod UID in a Bucket fleet)
//	CELLD_ADDR               application listener, default :8080 (health, records API)
//	CELLD_INTERNAL_ADDR      peer and control listener, default :8081 (GET /state)
//	CELLD_WATCH              the member's disk, default /work
//	CELLD_ADVERTISE          <node>.<fleet>-peers.<ns>.svc:8081: peers are the headless Service's addresses
//	CELLD_SHUTDOWN_TOTAL_MS  drain bound after SIGTERM, default 10000
//
// and celldsim's own knobs (user CELLD_* variables, so a CelldFleet's env can set them):
//
//	CELLD_SIM_PEERS            dns:NAME:PORT or host:port,... (overrides the advertise-derived peers)
//	CELLD_SIM_PEER_COPIES      peers that must hold a record before it is acknowledged, default 1
//	CELLD_SIM_PEER_TIMEOUT_MS  bound of one peer call, default 2000
//	CELLD_SIM_BOOTSTRAP_MS     how long a fresh disk waits for a recovered peer before starting empty, default 15000
//	CELLD_SIM_POD_UID          this Pod's UID (default: read from /proc/self/mountinfo, the kubelet's pods/<uid>/ mounts)
//
// A disk may carry celldsim's startup-denial marker (member.DenialName, one
// Pod UID): celldsim refuses to start in the Pod it names (see
// internal/member/denial.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/test/celldsim/internal/member"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "celldsim takes no arguments: it is configured by CELLD_* environment variables")
		os.Exit(2)
	}
	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "celldsim:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	m, err := member.New(cfg, log)
	if errors.Is(err, member.ErrStartupDenied) {
		log.Error("refusing to start", "node", cfg.Node, "pod", cfg.PodUID, "err", err)
		os.Exit(1)
	}
	if err != nil {
		log.Error("cannot open the member's disk", "node", cfg.Node, "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := m.Run(ctx); err != nil {
		log.Error("celldsim stopped", "node", cfg.Node, "err", err)
		os.Exit(1)
	}
}

// configFromEnv reads and validates the configuration.
func configFromEnv(getenv func(string) string) (member.Config, error) {
	str := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var errs []error
	millis := func(name string, def, lowest, highest int) time.Duration {
		v := str(name, strconv.Itoa(def))
		n, err := strconv.Atoi(v)
		if err != nil || n < lowest || n > highest {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer from %d to %d", name, v, lowest, highest))
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	cfg := member.Config{
		AppAddr:         str("CELLD_ADDR", ":8080"),
		InternalAddr:    str("CELLD_INTERNAL_ADDR", ":8081"),
		Watch:           str("CELLD_WATCH", "/work"),
		ShutdownTotal:   millis("CELLD_SHUTDOWN_TOTAL_MS", 10000, 0, 3600_000),
		PeerTimeout:     millis("CELLD_SIM_PEER_TIMEOUT_MS", 2000, 10, 600_000),
		BootstrapWindow: millis("CELLD_SIM_BOOTSTRAP_MS", 15000, 0, 3600_000),
	}
	host, _ := os.Hostname()
	cfg.Node = str("CELLD_NODE", host)
	cfg.PodUID = getenv("CELLD_SIM_POD_UID")
	if cfg.PodUID == "" {
		if f, err := os.Open("/proc/self/mountinfo"); err == nil {
			cfg.PodUID = member.PodUIDFromMountinfo(f)
			f.Close()
		}
	}
	copies, err := strconv.Atoi(str("CELLD_SIM_PEER_COPIES", "1"))
	if err != nil || copies < 0 || copies > 100 {
		errs = append(errs, fmt.Errorf("CELLD_SIM_PEER_COPIES=%q: want an integer from 0 to 100", getenv("CELLD_SIM_PEER_COPIES")))
	}
	cfg.MinPeerCopies = copies
	if s := getenv("CELLD_SIM_PEERS"); s != "" {
		cfg.Peers, err = member.ParsePeerSource(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("CELLD_SIM_PEERS: %w", err))
		}
	} else {
		cfg.Peers = member.PeerSourceFromAdvertise(getenv("CELLD_ADVERTISE"))
	}
	if cfg.Peers.Empty() && cfg.MinPeerCopies > 0 {
		errs = append(errs, fmt.Errorf("no peers (CELLD_ADVERTISE is %q and CELLD_SIM_PEERS is unset) "+
			"but CELLD_SIM_PEER_COPIES=%d: no write could be acknowledged", getenv("CELLD_ADVERTISE"), cfg.MinPeerCopies))
	}
	if len(errs) > 0 {
		return member.Config{}, fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return cfg, nil
}
