package main

import (
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cellfleet/cellfleet/internal/controller/fleet"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
	"github.com/cellfleet/cellfleet/internal/csi/server"
)

type options struct {
	// controllers is the half of the manager this process runs.
	controllers controllerSet

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

	// The volume controller (docs/volume-controller.md, "Flags (manager)").
	replicaRuntime          string
	replicaReplacementDelay time.Duration
	replicaRebuildTimeout   time.Duration
	maxReplacements         int
	orphanVolumeGrace       time.Duration
	certificateValidity     time.Duration
	storageNamespace        string
	managerNamespace        string

	// csiControllerSocket is the replicated driver's CSI controller socket
	// ("" serves none).
	csiControllerSocket string
}

// replicaRuntimeShared is the only --replica-runtime this release accepts.
const replicaRuntimeShared = "shared"

// controllerSet is the half of the manager one process runs (--controllers):
// the fleet operator, or the storage controllers (the volume controller and
// the replicated driver's CSI controller). Each half is its own Deployment
// with its own ServiceAccount and its own leader-election Lease, so the
// identity that operates fleets holds none of the storage half's grants
// (docs/decisions/0012-two-deployments.md).
type controllerSet string

const (
	controllersFleet   controllerSet = "fleet"
	controllersStorage controllerSet = "storage"
)

// leaderElectionID is the half's Lease in the manager's namespace. The fleet
// half keeps the Lease of the single manager of earlier releases; the
// storage half has its own.
func (c controllerSet) leaderElectionID() string {
	if c == controllersStorage {
		return "storage-controller.cellfleet.eric.dev"
	}
	return "manager.cellfleet.eric.dev"
}

// flagHalves names the flags only one half reads. Passing one to the other
// half is refused: a manifest that still passes, say, --csi-controller-socket
// to the fleet operator would otherwise start with no CSI controller at all.
var flagHalves = map[string]controllerSet{
	"member-replacement-delay":     controllersFleet,
	"fleet-namespaces":             controllersFleet,
	"replica-runtime":              controllersStorage,
	"replica-replacement-delay":    controllersStorage,
	"replica-rebuild-timeout":      controllersStorage,
	"max-concurrent-replacements":  controllersStorage,
	"orphan-volume-grace":          controllersStorage,
	"manager-namespace":            controllersStorage,
	"csi-controller-socket":        controllersStorage,
	"replica-certificate-validity": controllersStorage,
}

func parseFlags(args []string) (options, error) {
	o := options{controllers: controllersFleet}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.Func("controllers", "the half of the manager to run: fleet (the CelldFleet operator) or storage (the volume controller "+
		"and the replicated driver's CSI controller, beside the csi-provisioner and csi-resizer sidecars); each half is its "+
		"own Deployment and ServiceAccount (docs/install.md) (default fleet)", func(v string) error {
		switch c := controllerSet(v); c {
		case controllersFleet, controllersStorage:
			o.controllers = c
			return nil
		}
		return fmt.Errorf("%q is neither %q nor %q", v, controllersFleet, controllersStorage)
	})
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
		"comma-separated namespaces whose CelldFleets this manager operates; the fleet Role must be bound in each (docs/install.md)")
	fs.StringVar(&o.replicaRuntime, "replica-runtime", replicaRuntimeShared,
		"runtime of new replicated volumes' workers: shared (workers in the NODE DaemonSet's replica host); the legacy pod runtime is not offered (docs/decisions/0006-replica-replacement.md)")
	fs.DurationVar(&o.replicaReplacementDelay, "replica-replacement-delay", volume.DefaultReplicaReplacementDelay,
		"how long a replica's node may be gone, with a healthy quorum left, before the replica is replaced on another node (at least 1m)")
	fs.DurationVar(&o.replicaRebuildTimeout, "replica-rebuild-timeout", volume.DefaultReplicaRebuildTimeout,
		"how long a replacement replica may stay behind its coordinator before it is abandoned and another node is tried (at least 1m)")
	fs.IntVar(&o.maxReplacements, "max-concurrent-replacements", volume.DefaultMaxConcurrentReplacements,
		"how many replica replacements may be in progress at once across the cluster (at least 1); one per volume at most, whatever this says")
	fs.DurationVar(&o.orphanVolumeGrace, "orphan-volume-grace", volume.DefaultOrphanGracePeriod,
		"how long a ReplicatedVolume may be without its source claim and without a PersistentVolume before it is deleted (at least 1m: the provisioner may still be retrying)")
	fs.DurationVar(&o.certificateValidity, "replica-certificate-validity", volume.DefaultCertificateValidity,
		"life of a replica's certificate, renewed by the volume controller two thirds into it (at least 1h, at most 43800h)")
	fs.StringVar(&o.storageNamespace, "storage-namespace", "cellfleet-storage",
		"namespace of the NODE DaemonSet, the VolumeReplicas, backing claims, replica Services and the Secrets nodes read")
	fs.StringVar(&o.managerNamespace, "manager-namespace", "cellfleet-system",
		"the manager's own namespace: it alone holds the volumes' CA keys (must differ from --storage-namespace)")
	fs.StringVar(&o.csiControllerSocket, "csi-controller-socket", "",
		"unix socket (unix:///abs/path or /abs/path) on which to serve the CSI controller of replicated.storage.eric.dev "+
			"to the csi-provisioner and csi-resizer sidecars; empty serves none")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	err := fs.Parse(args)
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := checkFlagHalves(fs, o.controllers); err != nil {
		return o, err
	}
	if o.fleetNamespaces, err = parseNamespaces(*fleetNS); err != nil {
		return o, err
	}
	if o.controllers == controllersFleet {
		return o, validateFleetFlags(o)
	}
	if o.csiControllerSocket != "" {
		if o.csiControllerSocket, err = server.ParseEndpoint(o.csiControllerSocket); err != nil {
			return o, fmt.Errorf("--csi-controller-socket: %w", err)
		}
	}
	return o, validateVolumeFlags(o)
}

// checkFlagHalves refuses a flag set on the command line that only the other
// half reads.
func checkFlagHalves(fs *flag.FlagSet, running controllerSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if half, ok := flagHalves[f.Name]; ok && half != running && err == nil {
			err = fmt.Errorf("--%s is a flag of --controllers=%s, and this manager runs --controllers=%s: "+
				"each half is its own Deployment (docs/install.md, \"Two Deployments\")", f.Name, half, running)
		}
	})
	return err
}

// validateFleetFlags checks the fleet operator's flags at start.
func validateFleetFlags(o options) error {
	if o.memberReplacementDelay < fleet.MinMemberReplacementDelay {
		return fmt.Errorf("--member-replacement-delay=%s is below the minimum of %s: "+
			"a shorter delay would replace members that can still come back on their own disks",
			o.memberReplacementDelay, fleet.MinMemberReplacementDelay)
	}
	if errs := validation.IsDNS1123Label(o.storageNamespace); len(errs) > 0 {
		return fmt.Errorf("--storage-namespace: %q is not a namespace name: %s", o.storageNamespace, strings.Join(errs, "; "))
	}
	if slices.Contains(o.fleetNamespaces, o.storageNamespace) {
		// The fleet Role deletes Pods and claims in each fleet namespace: in
		// the storage namespace those are the NODE Pods and the replicas'
		// backing claims (docs/install.md, "Two Deployments").
		return fmt.Errorf("--fleet-namespaces includes %q, the storage namespace (--storage-namespace): the fleet Role "+
			"would let the fleet operator delete the NODE Pods and the replicated volumes' backing claims there; "+
			"operate fleets in another namespace", o.storageNamespace)
	}
	return nil
}

// validateVolumeFlags checks the storage half's flags at start.
func validateVolumeFlags(o options) error {
	if o.replicaRuntime != replicaRuntimeShared {
		// "pod" is a legacy runtime for volumes made by release 4.0.1; no
		// such volume exists here, so nothing needs it
		// (docs/decisions/0006-replica-replacement.md, "`--replica-runtime`
		// accepts only `shared`").
		return fmt.Errorf("--replica-runtime=%q is not supported: only %q is, because the legacy pod runtime exists "+
			"for volumes of earlier releases and there are none to keep", o.replicaRuntime, replicaRuntimeShared)
	}
	if o.replicaReplacementDelay < volume.MinReplicaReplacementDelay {
		return fmt.Errorf("--replica-replacement-delay=%s is below the minimum of %s: a shorter delay would replace "+
			"replicas whose node only restarts", o.replicaReplacementDelay, volume.MinReplicaReplacementDelay)
	}
	if o.replicaRebuildTimeout < volume.MinReplicaRebuildTimeout {
		return fmt.Errorf("--replica-rebuild-timeout=%s is below the minimum of %s: a rebuild needs time to start",
			o.replicaRebuildTimeout, volume.MinReplicaRebuildTimeout)
	}
	if o.maxReplacements < volume.MinMaxConcurrentReplacements {
		return fmt.Errorf("--max-concurrent-replacements=%d is below the minimum of %d: no lost replica would ever be replaced",
			o.maxReplacements, volume.MinMaxConcurrentReplacements)
	}
	if o.orphanVolumeGrace < volume.MinOrphanGracePeriod {
		return fmt.Errorf("--orphan-volume-grace=%s is below the minimum of %s: the provisioner may still be retrying "+
			"or creating the PersistentVolume", o.orphanVolumeGrace, volume.MinOrphanGracePeriod)
	}
	if o.certificateValidity < volume.MinCertificateValidity || o.certificateValidity > volume.MaxCertificateValidity {
		return fmt.Errorf("--replica-certificate-validity=%s must be between %s and %s: the hosts load a renewed "+
			"certificate during the last third of the old one's life", o.certificateValidity,
			volume.MinCertificateValidity, volume.MaxCertificateValidity)
	}
	for flag, ns := range map[string]string{"--storage-namespace": o.storageNamespace, "--manager-namespace": o.managerNamespace} {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%s: %q is not a namespace name: %s", flag, ns, strings.Join(errs, "; "))
		}
	}
	if o.storageNamespace == o.managerNamespace {
		return fmt.Errorf("--storage-namespace and --manager-namespace are both %q: the nodes read the storage namespace's "+
			"Secrets, so the volumes' CA keys would be readable by them", o.storageNamespace)
	}
	return nil
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
