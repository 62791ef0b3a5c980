// Command replica-host runs replica workers: one per replica of a volume,
// each on its own port, with the host's admission bounds, health and
// metrics. Without Kubernetes it runs from a standalone configuration file
// (`replica-host -config host.json`); `replica-host init-standalone` writes
// such files, certificates and a client configuration for a loopback volume.
// In Kubernetes mode (`replica-host -node NAME -namespace NS`, kube.go) it
// runs the VolumeReplicas of its node (internal/replica/kubehost).
//
// The status listener (TCP) serves only /healthz, /readyz, /metrics and
// read-only worker status; the admin API's mutations are served only on a
// local unix socket (-admin-socket, mode 0600), see
// docs/decisions/0003-host-admin-authority.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "init-standalone" {
		if err := initStandalone(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "replica-host init-standalone:", err)
			os.Exit(2)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "replica-host:", err)
		os.Exit(1)
	}
}

type runFlags struct {
	config       string
	statusListen string
	adminSocket  string
	logLevel     string
	segmentSize  int
	limits       host.Limits
	bandwidthMiB int64
	kube         kubeFlags
}

func parseRun(args []string) (runFlags, error) {
	var f runFlags
	def := host.DefaultLimits()
	fs := flag.NewFlagSet("replica-host", flag.ContinueOnError)
	fs.StringVar(&f.config, "config", "", "standalone configuration file (volumes, replicas, ports, certificates, data directories)")
	fs.StringVar(&f.statusListen, "status-listen", "", "TCP address for /healthz, /readyz, /metrics and read-only worker status (overrides the file's statusListen)")
	fs.StringVar(&f.adminSocket, "admin-socket", "", "unix socket (mode 0600) for the admin API's mutations (default: "+host.AdminSocketName+" in the state directory)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&f.segmentSize, "journal-segment-bytes", 16<<20, "journal segment size in bytes (1 MiB to 1 GiB)")
	fs.IntVar(&f.limits.MaxWorkers, "max-workers", def.MaxWorkers, "workers this host runs at most")
	fs.IntVar(&f.limits.MaxStarts, "max-concurrent-starts", def.MaxStarts, "workers starting at once")
	fs.IntVar(&f.limits.MaxHTTPOperations, "max-http-operations", def.MaxHTTPOperations, "shared HTTP operations in progress at once")
	fs.IntVar(&f.limits.MaxCaptures, "max-checkpoint-captures", def.MaxCaptures, "checkpoint captures at once")
	fs.IntVar(&f.limits.MaxRebuilds, "max-outbound-rebuilds", def.MaxRebuilds, "outbound rebuild transfers at once")
	fs.Int64Var(&f.bandwidthMiB, "rebuild-bandwidth-mib", def.RebuildBandwidth>>20, "MiB/s shared by outbound rebuilds")
	f.kube.register(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 && fs.Arg(0) != "run" {
		return f, fmt.Errorf("unknown argument %q", fs.Arg(0))
	}
	f.limits.RebuildBandwidth = f.bandwidthMiB << 20
	f.kube.defaults(f.config)
	var errs []error
	switch {
	case f.config == "" && f.kube.node == "":
		errs = append(errs, errors.New("one of -config (standalone mode) or -node (Kubernetes mode) is required"))
	case f.config != "" && f.kube.node != "":
		errs = append(errs, errors.New("-config (standalone mode) and -node (Kubernetes mode) exclude each other"))
	case f.kube.node != "":
		errs = append(errs, f.kube.validate(f.statusListen)...)
	}
	if f.segmentSize < 1<<20 || f.segmentSize > 1<<30 {
		errs = append(errs, fmt.Errorf("-journal-segment-bytes must be between 1 MiB and 1 GiB, got %d", f.segmentSize))
	}
	if f.bandwidthMiB < 1 || f.bandwidthMiB > 1<<20 {
		errs = append(errs, fmt.Errorf("-rebuild-bandwidth-mib must be between 1 and %d, got %d", 1<<20, f.bandwidthMiB))
	}
	if err := f.limits.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseLevel(f.logLevel); err != nil {
		errs = append(errs, err)
	}
	return f, errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("-log-level: %w", err)
	}
	return l, nil
}

func run(args []string) error {
	f, err := parseRun(args)
	if err != nil {
		return err
	}
	level, _ := parseLevel(f.logLevel)
	log := newLogger(os.Stderr, level)
	stopProfile, err := startCPUProfile(log)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: the profile covers the host's close.
	defer stopProfile()
	var file host.StandaloneFile
	if f.kube.node != "" {
		file = host.StandaloneFile{StateDir: f.kube.stateDir, StatusListen: f.statusListen}
	} else if file, err = host.LoadStandalone(f.config); err != nil {
		return err
	}
	if f.statusListen != "" {
		file.StatusListen = f.statusListen
	}
	if f.adminSocket == "" {
		f.adminSocket = filepath.Join(file.StateDir, host.AdminSocketName)
	}
	// One host per state directory, decided before anything is touched:
	// a second host exits here naming the first one's PID.
	lock, err := host.LockStateDir(file.StateDir)
	if err != nil {
		return err
	}
	defer lock.Release()
	// First, before any goroutine: ListenAdmin sets the process's umask.
	adminLn, err := host.ListenAdmin(f.adminSocket)
	if err != nil {
		return err
	}
	cfg := host.Config{StateDir: file.StateDir, Limits: f.limits, SegmentSize: f.segmentSize, DialPeer: dialPeer, Logger: log}
	if point := os.Getenv(host.HaltEnv); point != "" {
		// Test-only: see internal/replica/host/fault.go.
		cfg.HaltAt = host.FaultPoint(point)
		log.Warn("test fault point set: every worker start halts there", "env", host.HaltEnv, "point", point)
	}
	h, err := host.New(cfg)
	if err != nil {
		adminLn.Close()
		return err
	}
	ln, err := net.Listen("tcp", file.StatusListen)
	if err != nil {
		adminLn.Close()
		return fmt.Errorf("status listener: %w", err)
	}
	srv := serve(log, "status", ln, h.Handler())
	admin := serve(log, "admin", adminLn, h.AdminHandler())
	for _, spec := range file.Workers {
		state, cond, err := h.Add(spec)
		switch {
		case err != nil:
			log.Error("worker not admitted", "volume", spec.Volume, "replica", spec.Replica, "error", err)
		case cond != nil:
			log.Warn("worker admission", "volume", spec.Volume, "replica", spec.Replica, "state", state, "condition", cond.Condition, "reason", cond.Reason)
		}
	}
	log.Info("replica host running", "status", ln.Addr().String(), "adminSocket", f.adminSocket, "workers", len(file.Workers))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if f.kube.node != "" {
		if err := f.kube.run(ctx, h, log, stop); err != nil {
			log.Error("Kubernetes mode stopped", "error", err)
			stop()
		}
	}
	<-ctx.Done()
	log.Info("replica host stopping")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	_ = admin.Shutdown(sctx)
	h.Close()
	return nil
}

func serve(log *slog.Logger, name string, ln net.Listener, handler http.Handler) *http.Server {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP server stopped", "server", name, "error", err)
		}
	}()
	return srv
}

func initStandalone(args []string) error {
	var o standalone.GenerateOptions
	var capMiB uint64
	var hb, el, lease time.Duration
	fs := flag.NewFlagSet("init-standalone", flag.ContinueOnError)
	fs.StringVar(&o.Dir, "dir", "", "directory to write certificates, configs and data directories into")
	fs.StringVar(&o.Volume, "volume", "demo", "volume name")
	fs.IntVar(&o.Replicas, "replicas", 3, "replica count (1 to 5)")
	fs.IntVar(&o.BasePort, "base-port", 7400, "worker i listens on 127.0.0.1:base-port+i")
	fs.IntVar(&o.StatusBasePort, "status-base-port", 9400, "host i serves status on 127.0.0.1:status-base-port+i")
	fs.Uint64Var(&capMiB, "capacity-mib", 1024, "volume capacity in MiB")
	fs.DurationVar(&hb, "heartbeat-timeout", 0, "Raft heartbeat timeout (0: hashicorp/raft default)")
	fs.DurationVar(&el, "election-timeout", 0, "Raft election timeout (0: default)")
	fs.DurationVar(&lease, "leader-lease-timeout", 0, "Raft leader lease (0: default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Dir == "" {
		return errors.New("-dir is required")
	}
	if capMiB < 1 || capMiB > 1<<30 {
		return fmt.Errorf("-capacity-mib must be between 1 and %d", 1<<30)
	}
	if o.BasePort < 1 || o.BasePort+o.Replicas > 65535 || o.StatusBasePort < 1 || o.StatusBasePort+o.Replicas > 65535 {
		return errors.New("-base-port and -status-base-port must leave room for every replica below 65536")
	}
	o.Capacity = capMiB << 20
	o.Timing.HeartbeatTimeout, o.Timing.ElectionTimeout, o.Timing.LeaderLeaseTimeout = hb, el, lease
	g, err := standalone.Generate(o)
	if err != nil {
		return err
	}
	fmt.Printf("client config: %s\nsingle-process host config: %s\n", g.ClientFile, g.SingleHost)
	for _, f := range g.HostFiles {
		fmt.Printf("per-replica host config: %s\n", f)
	}
	return nil
}
