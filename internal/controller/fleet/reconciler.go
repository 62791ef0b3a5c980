package fleet

// The reconcile is a flat list of gates. Each gate either lets the next one run
// or stops with a finding; whatever happened, one function then writes status
// from what the cluster reports. Order matters in two places: replacement holds
// left by an earlier reconciler are settled before runtime validation and the
// workload gates (docs/fleet-operator.md, "The replacement handoff"), and
// self-healing of existing members runs after the workload gates whatever they
// found, since no administrator is expected to intervene
// (docs/fleet-operator.md, "Self-healing").

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// MinMemberReplacementDelay is the floor for --member-replacement-delay
// (docs/fleet-operator.md, "Self-healing").
const MinMemberReplacementDelay = time.Minute

// DefaultMemberReplacementDelay is the documented default
// (docs/fleet-operator.md, "Self-healing"): it outlasts the roughly six minutes
// Kubernetes takes to force-detach a volume from a lost node.
const DefaultMemberReplacementDelay = 10 * time.Minute

// Time constants of the self-healing rules (docs/fleet-operator.md,
// "Self-healing").
const (
	// strandedAfterGrace: a member Pod still present this long after its
	// termination grace ended is on a node that no longer answers.
	strandedAfterGrace = 2 * time.Minute
	// othersReadyFor: every other member must have been Ready this long
	// before a down member's disk is replaced, so no session depends on it.
	othersReadyFor = 5 * time.Minute
	// newPodChance: a member down for the replacement delay whose Pod was
	// recreated since (an interrupted handoff whose Pod delete went through,
	// an administrator's delete) is not replaced until that Pod has had this
	// long, at most the delay, to come back on its own disk. The delay itself
	// is timed from the member's first down moment (memberrecord.go), so a
	// Pod recreated early in the delay costs no extra wait.
	newPodChance = 2 * time.Minute
	// inFlightRequeue paces reconciles while something time-based is pending
	// (no watch event fires when a delay runs out).
	inFlightRequeue = 15 * time.Second
	// blockedRequeue paces reconciles of a Blocked fleet.
	blockedRequeue = time.Minute
)

// Options configure a Reconciler.
type Options struct {
	// MemberReplacementDelay is how long one member may stay down, while every
	// other member is Ready, before it is replaced on a fresh disk. Zero means
	// DefaultMemberReplacementDelay; below MinMemberReplacementDelay is an error.
	MemberReplacementDelay time.Duration
	// Clock is the operator's clock (tests inject a fake one).
	Clock clock.PassiveClock
	// APIReader reads around any cache: the handoff rereads the Pod and claim
	// it is about to act on. Defaults to the client.
	APIReader client.Reader
	// Recorder records events; nil records none.
	Recorder events.EventRecorder
	// Metrics are the per-fleet gauges; nil keeps none.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Reconciler reconciles CelldFleets.
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	scheme   *runtime.Scheme
	clock    clock.PassiveClock
	delay    time.Duration
	recorder events.EventRecorder
	metrics  *Metrics
	log      *slog.Logger
}

// New returns a Reconciler that writes through c.
func New(c client.Client, scheme *runtime.Scheme, opts Options) (*Reconciler, error) {
	if opts.MemberReplacementDelay == 0 {
		opts.MemberReplacementDelay = DefaultMemberReplacementDelay
	}
	if opts.MemberReplacementDelay < MinMemberReplacementDelay {
		return nil, fmt.Errorf("member replacement delay %s is below the minimum of %s", opts.MemberReplacementDelay, MinMemberReplacementDelay)
	}
	r := &Reconciler{client: c, reader: opts.APIReader, scheme: scheme, clock: opts.Clock,
		delay: opts.MemberReplacementDelay, recorder: opts.Recorder, metrics: opts.Metrics, log: opts.Logger}
	if r.reader == nil {
		r.reader = c
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// SetupWithManager registers the reconciler and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&celldv1alpha1.CelldFleet{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.Pod{}, podToFleet()).
		Watches(&corev1.PersistentVolumeClaim{}, podToFleet()).
		Named("celldfleet").
		Complete(r)
}

// Reconcile converges one fleet and reports its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := r.log.With("fleet", req.Name, "namespace", req.Namespace)
	f := &celldv1alpha1.CelldFleet{}
	if err := r.client.Get(ctx, req.NamespacedName, f); err != nil {
		if apierrors.IsNotFound(err) {
			r.metrics.forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("read fleet %s: %w", req.NamespacedName, err)
	}
	rep := &report{}
	err := r.reconcile(ctx, f, rep)
	if err != nil {
		log.Warn("reconcile failed", "err", err)
	}
	if rep.obs == nil {
		return ctrl.Result{}, err // nothing observed: the last status stands
	}
	if serr := r.writeStatus(ctx, f, rep); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if rep.blockedFinding(r.delay) != nil && (rep.requeue == 0 || rep.requeue > blockedRequeue) {
		// What unblocks a fleet (a ServiceAccount, a StorageClass, a released
		// bucket, fresh evidence) is not watched: look again.
		rep.requeue = blockedRequeue
	}
	return ctrl.Result{RequeueAfter: rep.requeue}, nil
}

func (r *Reconciler) reconcile(ctx context.Context, f *celldv1alpha1.CelldFleet, rep *report) error {
	deleting := f.DeletionTimestamp != nil
	if err := r.settleHolds(ctx, f, deleting || paused(f)); err != nil {
		return err
	}
	obs, err := r.observe(ctx, f)
	if err != nil {
		return err
	}
	rep.obs = obs
	rep.members = trackMembers(f, obs, r.clock.Now())
	if deleting {
		return r.deleteFleet(ctx, f, obs, rep)
	}
	if err := r.ensureFinalizer(ctx, f); err != nil {
		return err
	}
	if paused(f) {
		return nil
	}
	// Healing of existing members does not wait on the workload gates: no
	// administrator is expected to intervene (docs/fleet-operator.md,
	// "Self-healing"). An edited Service or a missing ServiceAccount stops the
	// operator from changing the workload, not from force-deleting a stranded
	// Pod or replacing a lost disk. Each healing rule carries its own safety
	// conditions.
	convergeErr := r.convergeWorkload(ctx, f, obs, rep)
	return errors.Join(convergeErr, r.healMembers(ctx, f, obs, rep))
}

// convergeWorkload is the list of workload gates. A gate that finds the fleet
// blocked stops the list: nothing after it is changed.
func (r *Reconciler) convergeWorkload(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) error {
	var err error
	if rep.blocked, err = r.validate(ctx, f); rep.blocked != nil || err != nil {
		return err
	}
	if rep.blocked, err = r.reserveBucket(ctx, f); rep.blocked != nil || err != nil {
		return err
	}
	if rep.uncertain, err = r.applyCapacityPolicy(ctx, f, obs); err != nil {
		return err
	}
	if rep.blocked, err = r.convergeServices(ctx, f); rep.blocked != nil || err != nil {
		return err
	}
	if rep.blocked, err = r.convergePDB(ctx, f); rep.blocked != nil || err != nil {
		return err
	}
	if rep.blocked, err = r.convergeNetworkPolicy(ctx, f); rep.blocked != nil || err != nil {
		return err
	}
	if !statefulSetFleet(f) {
		rep.blocked, err = r.convergeDeployment(ctx, f, obs, rep)
		return err
	}
	if rep.blocked, err = r.convergeStatefulSet(ctx, f, obs, rep); rep.blocked != nil || err != nil {
		return err
	}
	if ordered(f) {
		return r.releaseIntoZones(ctx, f, obs)
	}
	return nil
}

// healMembers runs self-healing whenever the fleet's own StatefulSet exists,
// whatever the workload gates found.
func (r *Reconciler) healMembers(ctx context.Context, f *celldv1alpha1.CelldFleet, obs *observation, rep *report) error {
	sts := obs.sts
	if !statefulSetFleet(f) || sts == nil || sts.DeletionTimestamp != nil || !metav1.IsControlledBy(sts, f) {
		return nil
	}
	msg := "every member is Ready"
	if !persistent(f) {
		msg = "no member Pod is stranded on a node that no longer answers; Bucket members have no disks to replace"
	}
	rep.healing = &healReport{reason: celldv1alpha1.ReasonNoMemberToHeal, message: msg}
	if err := r.forceDeleteStranded(ctx, f, obs, rep); err != nil {
		return err
	}
	if persistent(f) {
		return r.heal(ctx, f, obs, rep)
	}
	return nil
}

func (r *Reconciler) ensureFinalizer(ctx context.Context, f *celldv1alpha1.CelldFleet) error {
	if !controllerutil.AddFinalizer(f, celldv1alpha1.FinalizerFleet) {
		return nil
	}
	if err := r.client.Update(ctx, f); err != nil {
		return fmt.Errorf("add fleet finalizer: %w", err)
	}
	return nil
}
