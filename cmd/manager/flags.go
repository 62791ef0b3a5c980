package main

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cellfleet/cellfleet/internal/controller/fleet"
)

type options struct {
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	enableHTTP2             bool
	probeAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	memberReplacementDelay  time.Duration
	fleetNamespaces         []string
	logLevel                slog.Level
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443",
		"address the Prometheus metrics endpoint binds to (:8443 for HTTPS, :8080 with --metrics-secure=false, 0 disables it)")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"serve metrics over HTTPS, each request authenticated (TokenReview) and authorised (SubjectAccessReview: get on /metrics) by the API server")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-path", "",
		"directory holding tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate made at start)")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false,
		"allow HTTP/2 on the metrics endpoint (off: HTTP/2 stream resets, CVE-2023-44487 and CVE-2023-39325)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect one active manager through a Lease")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election Lease (default: the Pod's namespace)")
	fs.DurationVar(&o.memberReplacementDelay, "member-replacement-delay", fleet.DefaultMemberReplacementDelay,
		"how long one PersistentFleet member may stay down, while every other member is ready, before it is replaced on a fresh disk (at least 1m)")
	fleetNS := fs.String("fleet-namespaces", "celld",
		"comma-separated namespaces whose CelldFleets this manager operates; the fleet Role is bound in each (seed 002)")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.fleetNamespaces, err = parseNamespaces(*fleetNS); err != nil {
		return o, err
	}
	if o.memberReplacementDelay < fleet.MinMemberReplacementDelay {
		return o, fmt.Errorf("--member-replacement-delay=%s is below the minimum of %s: "+
			"a shorter delay would replace members that can still come back on their own disks",
			o.memberReplacementDelay, fleet.MinMemberReplacementDelay)
	}
	return o, nil
}

// parseNamespaces validates a comma-separated list of namespace names, so a
// typo fails at start instead of as a permission error on every list.
func parseNamespaces(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, ns := range strings.Split(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("--fleet-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		if !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--fleet-namespaces must name at least one namespace")
	}
	return out, nil
}
