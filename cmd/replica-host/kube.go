package main

// Kubernetes mode (internal/replica/kubehost): the NODE DaemonSet's
// replica-host container, with its own ServiceAccount (in-cluster config)
// or -kubeconfig. The node name and Pod IP come from the downward API
// (NODE_NAME, POD_IP) unless given as flags.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/apischeme"
	"github.com/cellfleet/cellfleet/internal/csi/server"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/kubehost"
)

// storageDigestAnnotation names the on-demand digest request in the help.
const storageDigestAnnotation = storagev1alpha1.AnnotationDigestRequested

// DefaultStorageNamespace is the volume controller's default storage namespace.
const DefaultStorageNamespace = "cellfleet-storage"

type kubeFlags struct {
	node, namespace, kubeconfig, podIP  string
	stateDir, consumerRoot, localCSI    string
	statusInterval, secretRefresh       time.Duration
	digestQuiet, digestInterval         time.Duration
	heartbeat, election, lease, commitT time.Duration
	trailingLogs                        uint64
	// hostLease is the duration of the host's Lease (kubehost/lease.go).
	hostLease time.Duration
}

func (k *kubeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.node, "node", "", "Kubernetes mode: this host's node (default $NODE_NAME, from the downward API, when -config is not given)")
	fs.StringVar(&k.namespace, "namespace", DefaultStorageNamespace, "Kubernetes mode: the storage namespace of the VolumeReplicas, claims, Services and Secrets")
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "Kubernetes mode: kubeconfig file (default: the in-cluster ServiceAccount)")
	fs.StringVar(&k.podIP, "pod-ip", os.Getenv("POD_IP"), "Kubernetes mode: the NODE Pod's IP, published in the replicas' EndpointSlices (default $POD_IP)")
	fs.StringVar(&k.stateDir, "state-dir", "", "Kubernetes mode: host storage for the initialisation history and credentials")
	fs.StringVar(&k.consumerRoot, "consumer-mount-root", "", "Kubernetes mode: the local driver's consumer mount root as this container sees it")
	fs.StringVar(&k.localCSI, "local-csi-endpoint", "", "Kubernetes mode: the local CSI driver's socket on this node, unix:///abs/path (the host asks it to publish each backing volume beneath the consumer mount root)")
	fs.DurationVar(&k.statusInterval, "status-interval", kubehost.DefaultStatusInterval, "Kubernetes mode: how often each replica's status is refreshed")
	fs.DurationVar(&k.secretRefresh, "secret-refresh", kubehost.DefaultSecretRefresh, "Kubernetes mode: how often each replica's Secret is read again")
	fs.DurationVar(&k.digestQuiet, "digest-quiet-period", kubehost.DefaultDigestQuiet,
		"Kubernetes mode: how long a replica's applied index must be still before its state digest is taken and published in status.digest (a digest reads the whole state, holding off the replica's applies: never while writes flow)")
	fs.DurationVar(&k.digestInterval, "digest-interval", kubehost.DefaultDigestInterval,
		"Kubernetes mode: the least time between two state digests of one replica (the annotation "+storageDigestAnnotation+" asks for one sooner)")
	fs.DurationVar(&k.heartbeat, "heartbeat-timeout", 0, "Kubernetes mode: Raft heartbeat timeout (0: hashicorp/raft default)")
	fs.DurationVar(&k.election, "election-timeout", 0, "Kubernetes mode: Raft election timeout (0: default)")
	fs.DurationVar(&k.lease, "leader-lease-timeout", 0, "Kubernetes mode: Raft leader lease (0: default)")
	fs.DurationVar(&k.commitT, "commit-timeout", 0, "Kubernetes mode: Raft commit timeout (0: default)")
	fs.DurationVar(&k.hostLease, "lease-duration", kubehost.DefaultLeaseDuration,
		"Kubernetes mode: duration of the host's Lease in the storage namespace, renewed every quarter of it; the volume controller judges "+
			"this node's replicas' host gone only once it expires (whole seconds, 2s to 10m)")
	fs.Uint64Var(&k.trailingLogs, "trailing-logs", 0,
		"Kubernetes mode: at most this many journal entries stay behind a checkpoint (0: default); fewer make a new replica rebuild from a checkpoint, through the outbound rebuild bound, sooner")
}

// defaults fills the node from the downward API's $NODE_NAME when neither
// mode was chosen by a flag: a standalone -config never picks it up.
func (k *kubeFlags) defaults(config string) {
	if k.node == "" && config == "" {
		k.node = os.Getenv("NODE_NAME")
	}
}

func (k *kubeFlags) validate(statusListen string) []error {
	var errs []error
	if k.stateDir == "" || k.consumerRoot == "" {
		errs = append(errs, errors.New("kubernetes mode needs -state-dir and -consumer-mount-root"))
	}
	if _, err := server.ParseEndpoint(k.localCSI); err != nil {
		errs = append(errs, fmt.Errorf("kubernetes mode needs -local-csi-endpoint unix:///abs/path of the local CSI driver: %w", err))
	}
	if statusListen == "" {
		errs = append(errs, errors.New("kubernetes mode needs -status-listen"))
	}
	if k.podIP == "" {
		errs = append(errs, errors.New("kubernetes mode needs the Pod IP: -pod-ip or $POD_IP"))
	}
	for name, d := range map[string]time.Duration{"heartbeat-timeout": k.heartbeat, "election-timeout": k.election,
		"leader-lease-timeout": k.lease, "commit-timeout": k.commitT} {
		if d < 0 || d > time.Minute {
			errs = append(errs, fmt.Errorf("-%s must be between 0 and 1m, got %s", name, d))
		}
	}
	if k.hostLease < kubehost.MinLeaseDuration || k.hostLease > kubehost.MaxLeaseDuration || k.hostLease%time.Second != 0 {
		errs = append(errs, fmt.Errorf("-lease-duration must be whole seconds between %s and %s, got %s",
			kubehost.MinLeaseDuration, kubehost.MaxLeaseDuration, k.hostLease))
	}
	return errs
}

func (k *kubeFlags) restConfig() (*rest.Config, error) {
	if k.kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", k.kubeconfig, err)
		}
		return c, nil
	}
	c, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster config (or pass -kubeconfig): %w", err)
	}
	return c, nil
}

// run starts the Kubernetes mode in the background; it returns an error
// when it cannot start, and calls stop when it ends on an error, so the
// process exits (and the kubelet restarts it) instead of serving unwatched.
func (k *kubeFlags) run(ctx context.Context, h *host.Host, log *slog.Logger, stop func()) error {
	cfg, err := k.restConfig()
	if err != nil {
		return err
	}
	scheme, err := apischeme.New()
	if err != nil {
		return err
	}
	opts := kubehost.Options{Node: k.node, Namespace: k.namespace, PodIP: k.podIP, ConsumerRoot: k.consumerRoot,
		LocalCSIEndpoint: k.localCSI,
		StateDir:         k.stateDir, StatusInterval: k.statusInterval, SecretRefresh: k.secretRefresh, Logger: log,
		DigestQuiet: k.digestQuiet, DigestInterval: k.digestInterval,
		Timing: replica.Timing{HeartbeatTimeout: k.heartbeat, ElectionTimeout: k.election, LeaderLeaseTimeout: k.lease, CommitTimeout: k.commitT,
			TrailingLogs: k.trailingLogs}}
	hb, err := kubehost.NewHeartbeat(cfg, k.namespace, k.node, k.hostLease, log)
	if err != nil {
		return err
	}
	// Ready once the Lease is renewed: the host reaches the API server and
	// the controller sees it alive (not: every worker healthy).
	h.SetReadiness(hb.Ready)
	go hb.Run(ctx)
	go func() {
		if err := kubehost.Run(ctx, cfg, scheme, h, opts); err != nil {
			log.Error("Kubernetes mode stopped", "error", err)
			stop()
		}
	}()
	return nil
}
