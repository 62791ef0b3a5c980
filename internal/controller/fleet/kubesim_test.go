package fleet_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

// kubeSim plays, for one namespace, the parts of Kubernetes that envtest does
// not run, so the operator sees what it would see in a cluster:
//
//   - the StatefulSet controller: adopts orphaned Pods its selector matches,
//     creates each member's claims (from the claim templates, unless a claim
//     of that name exists) and then its Pod, removes Pods above the replica
//     count, rolls outdated Pods one at a time, highest ordinal first,
//     waiting at an updated member that is not Ready (the RollingUpdate
//     strategy; OnDelete leaves them), never creates a Pod while one of that
//     name still exists, and reports status (observedGeneration, counts,
//     current and update revisions). Under podManagementPolicy OrderedReady
//     it acts as Kubernetes does: it creates and removes one Pod at a time
//     and stops at the first Pod, in ordinal order, that is not Running and
//     Ready, before it reaches the rolling update (so a Pod that never runs,
//     such as one held by a scheduling gate, stalls every later step);
//   - the garbage collector: deletes Pods whose StatefulSet is gone, and for
//     a StatefulSet deleted with propagation Orphan, removes its controller
//     reference from its Pods and then the orphan finalizer;
//   - the PVC protection controller: lets a deleted claim go (removes the
//     kubernetes.io/pvc-protection finalizer the API server adds) once no Pod
//     uses it; until then the StatefulSet does not recreate that member;
//   - the scheduler: binds ungated Pods to a node, or marks the members in
//     unschedulable PodScheduled=False/Unschedulable; a gated Pod reports
//     PodScheduled=False/SchedulingGated and no Ready condition;
//   - the v0.0.5 launcher: its scheduling gate is added to new Pods of the
//     members in gated, and removed from the members in launcherReleases;
//   - the kubelet: reports a new Pod not Ready at once, then Ready
//     (lastTransitionTime from the fake clock)
//     unless a member is in down or waiting on an image, or the Pod is in
//     denied or runs an image in crashing (its container restarts and is
//     refused, CrashLoopBackOff), and completes
//     graceful deletions except on nodes in deadNodes.
//
// Tests change the knobs, then call step to let these parts act once.
type kubeSim struct {
	t     *testing.T
	c     client.Client
	ns    string
	clock *clocktesting.FakeClock

	down          map[string]bool   // members whose celld never becomes Ready
	unschedulable map[string]bool   // members the scheduler finds no node for
	waiting       map[string]string // members whose container waits, by reason
	deadNodes     map[string]bool   // nodes whose kubelet no longer answers
	// schedulerPaused leaves every new Pod pending and undecided.
	schedulerPaused bool
	// gated members get the v0.0.5 launcher's scheduling gate on their next
	// Pod; launcherReleases are members whose gate the launcher removes.
	gated            map[string]bool
	launcherReleases map[string]bool
	// denied are Pods the v0.0.5 launcher retired: its startup-denial marker
	// names their UID, so celld refuses to start in them, restart after
	// restart, and starts on the same disk in any newer Pod.
	denied map[types.UID]bool
	// crashing are images whose container exits at start, restart after
	// restart (CrashLoopBackOff): a revision that never becomes Ready.
	crashing map[string]bool
}

const revisionLabel = "controller-revision-hash"

func newKubeSim(t *testing.T, c client.Client, ns string, clk *clocktesting.FakeClock) *kubeSim {
	return &kubeSim{t: t, c: c, ns: ns, clock: clk, down: map[string]bool{}, unschedulable: map[string]bool{},
		waiting: map[string]string{}, deadNodes: map[string]bool{}, gated: map[string]bool{}, launcherReleases: map[string]bool{},
		denied: map[types.UID]bool{}, crashing: map[string]bool{}}
}

// nodeOf is the node a member is bound to: one per member, zone by ordinal.
func nodeOf(pod string) string { return "node-" + pod }

func revisionOf(t corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:10]
}

func podOrdinal(sts, pod string) (int32, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(pod, sts+"-"))
	return int32(n), err == nil && strings.HasPrefix(pod, sts+"-")
}

// step lets the simulated controllers act once.
func (k *kubeSim) step(ctx context.Context) {
	k.t.Helper()
	var sets appsv1.StatefulSetList
	k.must(k.c.List(ctx, &sets, client.InNamespace(k.ns)))
	for i := range sets.Items {
		if sets.Items[i].DeletionTimestamp != nil {
			k.orphanDependents(ctx, &sets.Items[i])
			continue
		}
		k.syncStatefulSet(ctx, &sets.Items[i])
	}
	k.collectOrphans(ctx, sets.Items)
	k.must(testenv.LiftPVCProtection(ctx, k.c, k.ns))
	var pods corev1.PodList
	k.must(k.c.List(ctx, &pods, client.InNamespace(k.ns)))
	for i := range pods.Items {
		p := &pods.Items[i]
		k.launcher(ctx, p)
		k.schedule(ctx, p)
		k.kubelet(ctx, p)
	}
	for i := range sets.Items {
		k.reportStatus(ctx, &sets.Items[i])
	}
}

func (k *kubeSim) must(err error) {
	k.t.Helper()
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		k.t.Fatalf("simulated cluster: %v", err)
	}
}

func (k *kubeSim) members(ctx context.Context, sts *appsv1.StatefulSet) map[int32]*corev1.Pod {
	var pods corev1.PodList
	k.must(k.c.List(ctx, &pods, client.InNamespace(k.ns)))
	out := map[int32]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if owner := metav1.GetControllerOf(p); owner == nil || owner.UID != sts.UID {
			continue
		}
		if n, ok := podOrdinal(sts.Name, p.Name); ok {
			out[n] = p
		}
	}
	return out
}

func (k *kubeSim) syncStatefulSet(ctx context.Context, sts *appsv1.StatefulSet) {
	k.adopt(ctx, sts)
	replicas := ptr.Deref(sts.Spec.Replicas, 1)
	rev := revisionOf(sts.Spec.Template)
	members := k.members(ctx, sts)
	monotonic := sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	for n := range replicas {
		name := fmt.Sprintf("%s-%d", sts.Name, n)
		p, exists := members[n]
		if !exists {
			var existing corev1.Pod
			if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: name}, &existing); err != nil {
				k.createMember(ctx, sts, name, rev)
			}
			if monotonic {
				return // one Pod at a time, each after its predecessors are Running and Ready
			}
			continue
		}
		if monotonic && (isTerminating(p) || !runningAndReady(p)) {
			return
		}
	}
	condemned := slices.Sorted(maps.Keys(members))
	slices.Reverse(condemned)
	for _, n := range condemned {
		p := members[n]
		if n < replicas {
			continue
		}
		if isTerminating(p) {
			if monotonic {
				return
			}
			continue
		}
		k.must(k.c.Delete(ctx, p))
		if monotonic {
			return
		}
	}
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return
	}
	// RollingUpdate as the StatefulSet controller does it: from the highest
	// ordinal down, delete the first outdated Pod; wait at a missing,
	// terminating or not-Ready updated one.
	for n := replicas - 1; n >= 0; n-- {
		p, ok := members[n]
		switch {
		case !ok || isTerminating(p):
			return
		case p.Labels[revisionLabel] != rev:
			k.must(k.c.Delete(ctx, p))
			return
		case !isReady(p):
			return
		}
	}
}

// runningAndReady is the StatefulSet controller's test before an
// OrderedReady set takes its next step.
func runningAndReady(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && isReady(p) }

// adopt gives the StatefulSet the orphaned Pods its selector matches and its
// name claims, as the StatefulSet controller does.
func (k *kubeSim) adopt(ctx context.Context, sts *appsv1.StatefulSet) {
	var pods corev1.PodList
	k.must(k.c.List(ctx, &pods, client.InNamespace(k.ns), client.MatchingLabels(sts.Spec.Selector.MatchLabels)))
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, ok := podOrdinal(sts.Name, p.Name); !ok || metav1.GetControllerOf(p) != nil || isTerminating(p) {
			continue
		}
		p.OwnerReferences = append(p.OwnerReferences, *metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet")))
		k.must(k.c.Update(ctx, p))
	}
}

// orphanDependents is the garbage collector for a StatefulSet deleted with
// propagation Orphan: its Pods lose their controller reference, then the
// StatefulSet goes.
func (k *kubeSim) orphanDependents(ctx context.Context, sts *appsv1.StatefulSet) {
	if !slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents) {
		return
	}
	var pods corev1.PodList
	k.must(k.c.List(ctx, &pods, client.InNamespace(k.ns)))
	for i := range pods.Items {
		p := &pods.Items[i]
		if o := metav1.GetControllerOf(p); o == nil || o.UID != sts.UID {
			continue
		}
		p.OwnerReferences = slices.DeleteFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == sts.UID })
		k.must(k.c.Update(ctx, p))
	}
	sts.Finalizers = slices.DeleteFunc(sts.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
	k.must(k.c.Update(ctx, sts))
}

// launcher removes the v0.0.5 launcher's gate from the Pods it releases.
func (k *kubeSim) launcher(ctx context.Context, p *corev1.Pod) {
	if !k.launcherReleases[p.Name] || isTerminating(p) {
		return
	}
	gates := slices.DeleteFunc(slices.Clone(p.Spec.SchedulingGates), func(g corev1.PodSchedulingGate) bool {
		return g.Name == celldv1alpha1.SchedulingGateLauncher
	})
	if len(gates) != len(p.Spec.SchedulingGates) {
		p.Spec.SchedulingGates = gates
		k.must(k.c.Update(ctx, p))
	}
}

func (k *kubeSim) createMember(ctx context.Context, sts *appsv1.StatefulSet, name, rev string) {
	for _, tmpl := range sts.Spec.VolumeClaimTemplates {
		var c corev1.PersistentVolumeClaim
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: tmpl.Name + "-" + name}, &c); err == nil && c.DeletionTimestamp != nil {
			return // the claim is being deleted: wait for it to go
		}
	}
	pod := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = name, k.ns
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[revisionLabel] = rev
	pod.Labels["statefulset.kubernetes.io/pod-name"] = name
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	if k.gated[name] {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: celldv1alpha1.SchedulingGateLauncher})
	}
	for _, tmpl := range sts.Spec.VolumeClaimTemplates {
		claim := tmpl.DeepCopy()
		claim.Name, claim.Namespace = tmpl.Name+"-"+name, k.ns
		if err := k.c.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			k.t.Fatalf("simulated StatefulSet controller: create claim %s: %v", claim.Name, err)
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: tmpl.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
		}})
	}
	if err := k.c.Create(ctx, pod); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			k.t.Fatalf("simulated StatefulSet controller: create Pod %s: %v", name, err)
		}
		return
	}
	// The first report on a new Pod, at the simulated time: not Ready yet,
	// or, for a gated Pod, held by its gates (Kubernetes then reports no
	// Ready condition at all). (Server timestamps such as creationTimestamp
	// do not follow the fake clock, so the simulation reports a condition
	// time.)
	if len(pod.Spec.SchedulingGates) > 0 {
		setCond(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonSchedulingGated, LastTransitionTime: metav1.NewTime(k.clock.Now())})
	} else {
		setCond(pod, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: "ContainersNotReady", LastTransitionTime: metav1.NewTime(k.clock.Now())})
	}
	k.must(k.c.Status().Update(ctx, pod))
}

func (k *kubeSim) collectOrphans(ctx context.Context, sets []appsv1.StatefulSet) {
	live := map[string]bool{}
	for _, s := range sets {
		live[string(s.UID)] = true
	}
	var pods corev1.PodList
	k.must(k.c.List(ctx, &pods, client.InNamespace(k.ns)))
	for i := range pods.Items {
		p := &pods.Items[i]
		if o := metav1.GetControllerOf(p); o != nil && o.Kind == "StatefulSet" && !live[string(o.UID)] && !isTerminating(p) {
			k.must(k.c.Delete(ctx, p))
		}
	}
}

func (k *kubeSim) schedule(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName != "" || isTerminating(p) || len(p.Spec.SchedulingGates) > 0 || k.schedulerPaused {
		return
	}
	if k.unschedulable[p.Name] {
		if c := condOf(p, corev1.PodScheduled); c != nil && c.Reason == corev1.PodReasonUnschedulable {
			return
		}
		setCond(p, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(k.clock.Now())})
		k.must(k.c.Status().Update(ctx, p))
		return
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: k.ns},
		Target: corev1.ObjectReference{Kind: "Node", Name: nodeOf(p.Name)}}
	k.must(k.c.SubResource("binding").Create(ctx, p, binding))
}

func (k *kubeSim) kubelet(ctx context.Context, p *corev1.Pod) {
	if p.Spec.NodeName == "" {
		return
	}
	if isTerminating(p) {
		if !k.deadNodes[p.Spec.NodeName] && ptr.Deref(p.DeletionGracePeriodSeconds, 1) > 0 {
			k.must(k.c.Delete(ctx, p, client.GracePeriodSeconds(0)))
		}
		return
	}
	if k.deadNodes[p.Spec.NodeName] {
		return
	}
	waitReason := k.waiting[p.Name]
	if k.denied[p.UID] || k.crashing[p.Spec.Containers[0].Image] {
		waitReason = "CrashLoopBackOff"
	}
	ready := !k.down[p.Name] && waitReason == ""
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	changed := false
	if c := condOf(p, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		setCond(p, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(k.clock.Now())})
		changed = true
	}
	if c := condOf(p, corev1.PodReady); c == nil || c.Status != status {
		setCond(p, corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(k.clock.Now())})
		changed = true
	}
	var state corev1.ContainerState
	if waitReason != "" {
		state.Waiting = &corev1.ContainerStateWaiting{Reason: waitReason}
	} else {
		state.Running = &corev1.ContainerStateRunning{}
	}
	if len(p.Status.ContainerStatuses) == 0 || !equalState(p.Status.ContainerStatuses[0].State, state) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "celld", Image: p.Spec.Containers[0].Image, Ready: ready, State: state}}
		changed = true
	}
	if p.Status.Phase != corev1.PodRunning {
		p.Status.Phase = corev1.PodRunning
		changed = true
	}
	if changed {
		k.must(k.c.Status().Update(ctx, p))
	}
}

func equalState(a, b corev1.ContainerState) bool {
	return (a.Waiting == nil) == (b.Waiting == nil) && (a.Running == nil) == (b.Running == nil) &&
		(a.Waiting == nil || a.Waiting.Reason == b.Waiting.Reason)
}

func (k *kubeSim) reportStatus(ctx context.Context, sts *appsv1.StatefulSet) {
	fresh := &appsv1.StatefulSet{}
	if err := k.c.Get(ctx, client.ObjectKeyFromObject(sts), fresh); err != nil {
		return
	}
	rev := revisionOf(fresh.Spec.Template)
	var s appsv1.StatefulSetStatus
	s.ObservedGeneration = fresh.Generation
	s.UpdateRevision = rev
	for _, p := range k.members(ctx, fresh) {
		if isTerminating(p) {
			continue
		}
		s.Replicas++
		if isReady(p) {
			s.ReadyReplicas++
			s.AvailableReplicas++
		}
		if p.Labels[revisionLabel] == rev {
			s.UpdatedReplicas++
		}
	}
	s.CurrentRevision = fresh.Status.CurrentRevision
	if s.UpdatedReplicas == s.Replicas || s.CurrentRevision == "" {
		s.CurrentRevision = rev
	}
	if fresh.Status.ObservedGeneration != s.ObservedGeneration || fresh.Status.Replicas != s.Replicas ||
		fresh.Status.ReadyReplicas != s.ReadyReplicas || fresh.Status.UpdatedReplicas != s.UpdatedReplicas ||
		fresh.Status.CurrentRevision != s.CurrentRevision || fresh.Status.UpdateRevision != s.UpdateRevision {
		fresh.Status = s
		k.must(k.c.Status().Update(ctx, fresh))
	}
}

// markLost reports a claim's volume as gone, as Kubernetes does.
func (k *kubeSim) markLost(ctx context.Context, claim string) {
	k.t.Helper()
	c := &corev1.PersistentVolumeClaim{}
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: claim}, c); err != nil {
		k.t.Fatal(err)
	}
	c.Status.Phase = corev1.ClaimLost
	if err := k.c.Status().Update(ctx, c); err != nil {
		k.t.Fatal(err)
	}
}

func isTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

func isReady(p *corev1.Pod) bool {
	c := condOf(p, corev1.PodReady)
	return !isTerminating(p) && c != nil && c.Status == corev1.ConditionTrue
}

func condOf(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func setCond(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// until steps the simulated cluster alone (no operator) until done holds.
func (k *kubeSim) until(what string, done func() bool) {
	k.t.Helper()
	for range maxRounds {
		k.step(context.Background())
		if done() {
			return
		}
	}
	k.t.Fatalf("the simulated cluster never reached: %s", what)
}
