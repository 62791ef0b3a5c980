package kubehost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/server"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// Defaults of Options.
const (
	// DefaultStatusInterval is how often a replica's status is re-read from
	// its worker and written when it changed (besides every watch event).
	DefaultStatusInterval = 2 * time.Second
	// DefaultSecretRefresh is how often a running replica's Secret is read
	// again; a failed read keeps the files the worker already has.
	DefaultSecretRefresh = time.Minute
)

// Options configure the Kubernetes mode of one host.
type Options struct {
	Node      string // the node this host runs on (spec.node of its replicas)
	Namespace string // the storage namespace
	// PodIP is the NODE Pod's IP (downward API): the address of every
	// EndpointSlice the host publishes and the IP its workers listen on.
	PodIP string
	// ConsumerRoot is the consumer mount root as this container sees it
	// (HostToContainer propagation): a backing volume bound to PV p is
	// published at ConsumerRoot/p.
	ConsumerRoot string
	// LocalCSIEndpoint is the local driver's CSI socket on this node
	// ("unix:///abs/path"): the host asks it to publish and unpublish each
	// backing volume beneath ConsumerRoot (publish.go).
	LocalCSIEndpoint string
	// StateDir is host storage: credentials are written beneath it.
	StateDir       string
	Timing         replica.Timing
	StatusInterval time.Duration
	SecretRefresh  time.Duration
	// DigestQuiet is how long a worker's applied index must be still
	// before its state digest is taken; DigestInterval the least time
	// between two digests of one replica not asked for by annotation
	// (digest.go). Zero: the defaults.
	DigestQuiet    time.Duration
	DigestInterval time.Duration
	Logger         *slog.Logger
}

func (o *Options) validate() error {
	var errs []error
	if o.Node == "" || o.Namespace == "" {
		errs = append(errs, errors.New("the node and the storage namespace are required"))
	}
	if ip := net.ParseIP(o.PodIP); ip == nil {
		errs = append(errs, fmt.Errorf("pod IP %q is not an IP address (set it from status.podIP through the downward API)", o.PodIP))
	}
	if o.ConsumerRoot == "" || !filepath.IsAbs(o.ConsumerRoot) {
		errs = append(errs, fmt.Errorf("consumer mount root %q must be an absolute path", o.ConsumerRoot))
	}
	if _, err := server.ParseEndpoint(o.LocalCSIEndpoint); err != nil {
		errs = append(errs, fmt.Errorf("the local CSI driver's endpoint %q must be unix:///absolute/path (the host asks it for each backing volume's publication): %v",
			o.LocalCSIEndpoint, err))
	}
	if o.StateDir == "" {
		errs = append(errs, errors.New("the state directory is required"))
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = DefaultStatusInterval
	}
	if o.SecretRefresh == 0 {
		o.SecretRefresh = DefaultSecretRefresh
	}
	if o.DigestQuiet == 0 {
		o.DigestQuiet = DefaultDigestQuiet
	}
	if o.DigestInterval == 0 {
		o.DigestInterval = DefaultDigestInterval
	}
	if o.DigestQuiet < minDigestQuiet || o.DigestQuiet > maxDigestQuiet {
		errs = append(errs, fmt.Errorf("the digest quiet period must be between %s and %s, got %s", minDigestQuiet, maxDigestQuiet, o.DigestQuiet))
	}
	if o.DigestInterval < minDigestInterval || o.DigestInterval > maxDigestInterval {
		errs = append(errs, fmt.Errorf("the digest interval must be between %s and %s, got %s", minDigestInterval, maxDigestInterval, o.DigestInterval))
	}
	if o.StatusInterval < 100*time.Millisecond || o.SecretRefresh < time.Second {
		errs = append(errs, errors.New("the status interval must be at least 100ms and the secret refresh at least 1s"))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Agent runs the VolumeReplicas of one node on a host.
type Agent struct {
	opts   Options
	host   *host.Host
	client client.Client // cached reads of the node's replicas and the host's EndpointSlices
	reader client.Reader // uncached gets of Secrets and claims (no list or watch on them)
	log    *slog.Logger
	creds  *credentials
	// secrets reads the node's replicas' Secrets as the node's own
	// ServiceAccount (exchange.go); the host's identity reads none.
	secrets secretGetter
	hosted  hostedNames
	local   *localDriver // the local CSI driver of this node
	digest  *digests     // state digests of the running workers (digest.go)
	// publishing is held across each publication and unpublication and
	// its record (publish.go, orphans.go).
	publishing sync.Mutex
}

// Run starts the agent against the API server of cfg and blocks until ctx
// ends. Its cache holds only the VolumeReplicas labelled with its node and
// the EndpointSlices this kind of host manages, in the storage namespace.
func Run(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, h *host.Host, opts Options) error {
	if err := opts.validate(); err != nil {
		return fmt.Errorf("replica host, Kubernetes mode: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"}, // the host's status listener serves metrics
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&storagev1alpha1.VolumeReplica{}: {Label: labels.SelectorFromSet(labels.Set{storagev1alpha1.LabelNode: opts.Node})},
				&discoveryv1.EndpointSlice{}:     {Label: labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: ManagedBy})},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("replica host manager: %w", err)
	}
	ld, err := dialLocalDriver(opts.LocalCSIEndpoint)
	if err != nil {
		return err
	}
	defer ld.Close()
	secrets, err := nodeSecrets(cfg, opts.Namespace, opts.Node)
	if err != nil {
		return err
	}
	a := &Agent{opts: opts, host: h, client: mgr.GetClient(), reader: mgr.GetAPIReader(), log: opts.Logger,
		creds: newCredentials(filepath.Join(opts.StateDir, "credentials")), secrets: secrets, local: ld,
		digest: newDigests(opts.DigestQuiet, opts.DigestInterval, opts.Logger)}
	if err := a.setup(mgr); err != nil {
		return err
	}
	a.log.Info("replica host in Kubernetes mode", "node", opts.Node, "namespace", opts.Namespace, "podIP", opts.PodIP,
		"consumerRoot", opts.ConsumerRoot, "localCSI", opts.LocalCSIEndpoint)
	return mgr.Start(ctx)
}

func (a *Agent) setup(mgr ctrl.Manager) error {
	// A peer's EndpointSlice appearing wakes the replicas waiting to dial it.
	peerSlice := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &storagev1alpha1.VolumeReplicaList{}
		if err := a.client.List(ctx, list, client.InNamespace(a.opts.Namespace),
			client.MatchingLabels{storagev1alpha1.LabelVolume: obj.GetLabels()[storagev1alpha1.LabelVolume]}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return out
	})
	err := ctrl.NewControllerManagedBy(mgr).Named("replica-host").
		For(&storagev1alpha1.VolumeReplica{}).
		Watches(&discoveryv1.EndpointSlice{}, peerSlice).
		Complete(a)
	if err != nil {
		return fmt.Errorf("replica host controller: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(a.sweepOrphans)); err != nil {
		return fmt.Errorf("replica host orphan sweep: %w", err)
	}
	return nil
}

// Reconcile brings one VolumeReplica of this node to its intent and reports
// its worker. It requeues itself every StatusInterval: the worker's role and
// progress change without any API event.
func (a *Agent) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vr := &storagev1alpha1.VolumeReplica{}
	if err := a.client.Get(ctx, req.NamespacedName, vr); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without our acknowledgement: its release was waived
			// (its host counted gone) or its finalizer removed by hand.
			// Close the worker and release what the host still holds.
			a.stop(req.Name, req.Namespace)
			return ctrl.Result{}, a.releaseOrphans(ctx, req.Name)
		}
		return ctrl.Result{}, fmt.Errorf("read VolumeReplica %s: %w", req, err)
	}
	if vr.Spec.Node != a.opts.Node {
		return ctrl.Result{}, nil
	}
	if vr.DeletionTimestamp != nil {
		return ctrl.Result{}, a.release(ctx, vr)
	}
	obs, err := a.run(ctx, vr)
	obs.members, obs.membership = a.membershipPass(ctx, vr)
	if serr := a.writeStatus(ctx, vr, obs); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		a.log.Warn("replica not settled", "replica", vr.Name, "volume", vr.Spec.VolumeName, "error", err)
	}
	return ctrl.Result{RequeueAfter: a.opts.StatusInterval}, nil
}

// key is the host's worker key of a replica.
func key(vr *storagev1alpha1.VolumeReplica) string { return vr.Spec.VolumeName + "/" + vr.Name }
