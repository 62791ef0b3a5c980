package volume

// One reconcile of a ReplicatedVolume is a flat list of steps, each creating
// what is missing and leaving what exists: the finalizer, the volume's CA,
// the VolumeReplicas (the placement record), their peers, then per replica
// its Secret, backing claim and Service, and the mount Secret. Whatever
// happened, status is then written once from what the replicas report.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Replacement delay bounds (docs/volume-controller.md, "Replacement";
// replacement.go): how long a replica's node may be gone before the replica
// is replaced elsewhere. At least a minute, so a node that only restarts is
// not replaced.
const (
	DefaultReplicaReplacementDelay = 30 * time.Minute
	MinReplicaReplacementDelay     = time.Minute
)

// Requeue pacing while something not watched may change: a volume waiting
// for nodes, or a teardown waiting for a host's acknowledgement.
const (
	pendingRequeue  = 30 * time.Second
	teardownRequeue = 10 * time.Second
)

// Options configure a Reconciler.
type Options struct {
	// Namespace is the storage namespace: VolumeReplicas, backing claims,
	// replica Services and the Secrets the nodes read live there, and the
	// NODE DaemonSet runs there.
	Namespace string
	// ManagerNamespace holds the volumes' CA Secrets; nothing but the manager
	// reads it. It must differ from Namespace.
	ManagerNamespace string
	// Ports is the per-node range of replica listener ports; zero means
	// [DefaultPortBase, DefaultPortBase+DefaultPortCount).
	Ports PortRange
	// ReplicaReplacementDelay: zero means DefaultReplicaReplacementDelay.
	ReplicaReplacementDelay time.Duration
	// ReplicaRebuildTimeout bounds how long a replacement may stay behind
	// before it is abandoned (stuck.go); zero means
	// DefaultReplicaRebuildTimeout.
	ReplicaRebuildTimeout time.Duration
	// MaxConcurrentReplacements bounds the replacements in progress
	// across the cluster (bound.go); zero means
	// DefaultMaxConcurrentReplacements.
	MaxConcurrentReplacements int
	// OrphanGracePeriod is how long a volume may be without its source
	// claim and without a PersistentVolume before it is collected
	// (orphan.go); zero means DefaultOrphanGracePeriod.
	OrphanGracePeriod time.Duration
	// CertificateValidity is the life of a replica certificate, renewed
	// two thirds into it (trust.go); zero means DefaultCertificateValidity.
	CertificateValidity time.Duration
	// APIReader reads around the cache (ports, secrets, claims at teardown).
	// Defaults to the client.
	APIReader client.Reader
	// Recorder records events; nil records none.
	Recorder events.EventRecorder
	// Metrics are the per-volume gauges; nil keeps none.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Reconciler reconciles ReplicatedVolumes.
type Reconciler struct {
	client           client.Client
	reader           client.Reader
	scheme           *runtime.Scheme
	namespace        string
	managerNamespace string
	ports            PortRange
	replacementDelay time.Duration
	rebuildTimeout   time.Duration
	maxReplacements  int
	orphanGrace      time.Duration
	certValidity     time.Duration
	recorder         events.EventRecorder
	metrics          *Metrics
	log              *slog.Logger
	// portMu serialises port allocation (ports.go).
	portMu sync.Mutex
}

// New returns a Reconciler that writes through c.
func New(c client.Client, scheme *runtime.Scheme, opts Options) (*Reconciler, error) {
	if opts.Namespace == "" || opts.ManagerNamespace == "" {
		return nil, errors.New("volume controller: the storage namespace and the manager namespace are required")
	}
	if opts.Namespace == opts.ManagerNamespace {
		return nil, fmt.Errorf("volume controller: the storage namespace %q must differ from the manager's namespace, "+
			"which holds the volumes' CA keys that no node may read", opts.Namespace)
	}
	if opts.Ports == (PortRange{}) {
		opts.Ports = PortRange{Base: DefaultPortBase, Count: DefaultPortCount}
	}
	if err := opts.Ports.validate(); err != nil {
		return nil, err
	}
	if opts.ReplicaReplacementDelay == 0 {
		opts.ReplicaReplacementDelay = DefaultReplicaReplacementDelay
	}
	if opts.ReplicaReplacementDelay < MinReplicaReplacementDelay {
		return nil, fmt.Errorf("replica replacement delay %s is below the minimum of %s", opts.ReplicaReplacementDelay, MinReplicaReplacementDelay)
	}
	if opts.ReplicaRebuildTimeout == 0 {
		opts.ReplicaRebuildTimeout = DefaultReplicaRebuildTimeout
	}
	if opts.MaxConcurrentReplacements == 0 {
		opts.MaxConcurrentReplacements = DefaultMaxConcurrentReplacements
	}
	if opts.MaxConcurrentReplacements < MinMaxConcurrentReplacements {
		return nil, fmt.Errorf("at most %d concurrent replacements: at least %d must be allowed", opts.MaxConcurrentReplacements, MinMaxConcurrentReplacements)
	}
	if opts.OrphanGracePeriod == 0 {
		opts.OrphanGracePeriod = DefaultOrphanGracePeriod
	}
	if opts.CertificateValidity == 0 {
		opts.CertificateValidity = DefaultCertificateValidity
	}
	if opts.CertificateValidity < 0 || opts.CertificateValidity > MaxCertificateValidity {
		return nil, fmt.Errorf("certificate validity %s must be positive and at most %s", opts.CertificateValidity, MaxCertificateValidity)
	}
	if opts.ReplicaRebuildTimeout < 0 || opts.OrphanGracePeriod < 0 {
		return nil, fmt.Errorf("replica rebuild timeout %s and orphan grace period %s must be positive", opts.ReplicaRebuildTimeout, opts.OrphanGracePeriod)
	}
	r := &Reconciler{client: c, reader: opts.APIReader, scheme: scheme, namespace: opts.Namespace,
		managerNamespace: opts.ManagerNamespace, ports: opts.Ports, replacementDelay: opts.ReplicaReplacementDelay,
		rebuildTimeout: opts.ReplicaRebuildTimeout, maxReplacements: opts.MaxConcurrentReplacements, orphanGrace: opts.OrphanGracePeriod,
		certValidity: opts.CertificateValidity, recorder: opts.Recorder, metrics: opts.Metrics, log: opts.Logger}
	if r.reader == nil {
		r.reader = c
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// SetupWithManager registers the reconciler, with the per-node credentials
// reconciler beside it (nodecredentials.go), and its watches: its own
// objects by owner, and Nodes and NODE Pods (they decide eligibility; a
// Node's absence makes its replicas' host gone) for every volume still
// waiting to be placed and every volume with a replica on the node. The
// hosts' Leases are read, not watched: a renewal every few seconds would
// reconcile every volume of the node, and an expiry sends no event anyway
// (liveness.go requeues just after it).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.NodeCredentials().setupWithManager(mgr); err != nil {
		return fmt.Errorf("per-node credentials controller: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&storagev1alpha1.ReplicatedVolume{}).
		Owns(&storagev1alpha1.VolumeReplica{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&corev1.Service{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.forNode)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.unplacedForPod)).
		Named("replicatedvolume").
		Complete(r)
}

// unplaced lists the volumes not yet Placed.
func (r *Reconciler) unplaced(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &storagev1alpha1.ReplicatedVolumeList{}
	if err := r.client.List(ctx, list); err != nil {
		r.log.Warn("list volumes for a node change", "err", err)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if !placed(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return out
}

func (r *Reconciler) unplacedForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() != r.namespace || obj.GetLabels()[NodeComponentLabel] != NodeComponentValue {
		return nil
	}
	return r.onNode(ctx, obj.(*corev1.Pod).Spec.NodeName, r.unplaced(ctx, obj))
}

func (r *Reconciler) forNode(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.onNode(ctx, obj.GetName(), r.unplaced(ctx, obj))
}

// onNode adds to out the volumes with a replica on node.
func (r *Reconciler) onNode(ctx context.Context, node string, out []reconcile.Request) []reconcile.Request {
	if node == "" {
		return out
	}
	list := &storagev1alpha1.VolumeReplicaList{}
	if err := r.client.List(ctx, list, client.InNamespace(r.namespace), client.MatchingLabels{storagev1alpha1.LabelNode: node}); err != nil {
		r.log.Warn("list replicas for a node change", "node", node, "err", err)
		return out
	}
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Spec.VolumeName}})
	}
	return out
}

func placed(rv *storagev1alpha1.ReplicatedVolume) bool {
	for _, c := range rv.Status.Conditions {
		if c.Type == storagev1alpha1.VolumePlaced.String() {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// reconcile converges one volume and reports its status; Reconcile
// (conflict.go) turns its conflicts into requeues.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rv := &storagev1alpha1.ReplicatedVolume{}
	if err := r.client.Get(ctx, req.NamespacedName, rv); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("read volume %s: %w", req.Name, err)
	}
	set, err := r.listReplicas(ctx, rv)
	if err != nil {
		return ctrl.Result{}, err
	}
	if rv.DeletionTimestamp != nil {
		return r.reconcileDeletion(ctx, rv, set)
	}
	collected, orphanIn, err := r.collectOrphan(ctx, rv)
	if err != nil {
		// Uncertain: the volume is kept and provisioning goes on.
		r.log.Warn("orphan check failed; the volume is kept", "volume", rv.Name, "err", err)
	}
	if collected {
		return ctrl.Result{}, nil // its deletion event starts the teardown
	}
	o := outcome{set: set}
	o.placedErr = r.provision(ctx, rv, &o)
	err = o.placedErr
	if o.placedErr != nil {
		r.log.Warn("provisioning stopped", "volume", rv.Name, "err", o.placedErr)
	}
	if serr := r.writeStatus(ctx, rv, buildStatus(rv, o)); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.pending != nil {
		return ctrl.Result{RequeueAfter: pendingRequeue}, nil
	}
	return ctrl.Result{RequeueAfter: soonest(o.replace.requeue, orphanIn, renewalIn(o.renewAt))}, nil
}

// soonest is the shortest positive duration (0 when none is).
func soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}

// provision runs the creation steps in order, recording in o what they
// found; a replacement step runs after placement, so the objects of a
// replica it allocates are created in the same reconcile. o.short names the
// backing claims that do not hold the volume's capacity yet (growth.go);
// o.renewAt is the soonest renewal of a replica's certificate (trust.go).
func (r *Reconciler) provision(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, o *outcome) error {
	if controllerutil.AddFinalizer(rv, storagev1alpha1.FinalizerVolumeTeardown) {
		if err := r.client.Update(ctx, rv); err != nil {
			return fmt.Errorf("add finalizer to volume %s: %w", rv.Name, err)
		}
	}
	trust, err := r.ensureCA(ctx, rv)
	if err != nil {
		return err
	}
	if o.pending, err = r.place(ctx, rv, &o.set); err != nil {
		o.pending = nil
		return err
	}
	if o.pending != nil {
		r.event(rv, eventWarning, EventPending, "Place", "%s", o.pending.message(replicaCount(rv)))
		return nil
	}
	if o.replace, err = r.replace(ctx, rv, &o.set); err != nil {
		return fmt.Errorf("replacement: %w", err)
	}
	if err := r.syncPeers(ctx, o.set); err != nil {
		return err
	}
	for _, vr := range o.set {
		if !member(vr) {
			continue
		}
		renewAt, err := r.ensureReplicaSecret(ctx, rv, trust, vr)
		if err != nil {
			return err
		}
		o.renewAt = earliest(o.renewAt, renewAt)
		held, err := r.ensureClaim(ctx, rv, vr)
		if err != nil {
			return err
		}
		if !held {
			o.short = append(o.short, vr.Spec.BackingClaimName)
		}
		if err := r.ensureService(ctx, rv, vr); err != nil {
			return err
		}
	}
	if err := r.syncCapacity(ctx, rv, o.set, o.short); err != nil {
		return err
	}
	return r.ensureMountSecret(ctx, rv, trust)
}

func (r *Reconciler) reconcileDeletion(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, set replicaSet) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(rv, storagev1alpha1.FinalizerVolumeTeardown) {
		return ctrl.Result{}, nil
	}
	waiting, err := r.teardown(ctx, rv, set)
	if waiting == "" && err == nil {
		return ctrl.Result{}, nil // the finalizer is gone; so is the volume
	}
	o := outcome{set: set, deleting: waiting, uncertain: uncertain(err)}
	if err != nil {
		r.log.Warn("teardown stopped; storage preserved", "volume", rv.Name, "err", err)
	}
	if serr := r.writeStatus(ctx, rv, buildStatus(rv, o)); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: teardownRequeue}, nil
}
