package e2e

// Qualification (docs/local-cluster.md, "Qualification (`make e2e`)"; results
// in docs/qualification.md): an upgrade from v0.0.5 after its launcher
// retired a member's disk; the member rejoins on that disk (#60). What v0.0.5
// left is rebuilt on the live fleet with the operator stopped: a StatefulSet
// with OnDelete and OrderedReady (the API default) whose template carries the
// launcher's scheduling gate, every member's Pod created from that template
// (so each carries v0.0.5's revision), a member held by that gate, a member
// retired by the launcher (its Pod still there, stopped: celldsim's
// startup-denial marker naming that exact Pod UID on its disk, its claim
// kept), and the reservation annotation with legacy fields. The operator then
// adopts it.
//
// The retired member's Pod still exists because that is what the marker is
// for: it names one Pod UID, so it stops the member across the kubelet's
// container restarts in that Pod, while a new Pod may reuse the disk (issue
// 15). Under OnDelete nothing replaced that Pod; after the upgrade the
// rolling update does, and the new Pod rejoins on the disk.
//
// Its first run (2026-12-01) built a state v0.0.5 could not leave: it retired
// the member before swapping in the v0.0.5 StatefulSet, so the retired Pod
// came from the operator's own template and carried the revision the
// operator renders again. The StatefulSet controller counts such a Pod as
// updated and never replaces it. The setup now rolls every member onto
// v0.0.5's template first and checks each Pod carries v0.0.5's revision.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

// denialMarker is celldsim's startup-denial marker (test/celldsim,
// internal/member/denial.go): one Pod UID in the member's disk.
const denialMarker = "celldsim.denied-pod-uid"

// legacyReservationState is what v0.0.5 kept in the reservation annotation.
const legacyReservationState = `{"claims":{"data-q-v005-0":"x"},"strictOperations":["retire"],"lastDisruption":"2026-01-01T00:00:00Z","appliedCount":3}`

func TestUpgradeFromV005RetiredMemberRejoinsOnItsDisk(t *testing.T) {
	// The marker is written on the volume's directory, the workload killed
	// through /proc, the StatefulSet's recreation read from the audit log.
	requirePower(t, cluster.PowerHostDisks, cluster.PowerHostProcesses, cluster.PowerAuditLog)
	runScenario(t, "upgrade from v0.0.5: the retired member rejoins on its disk", persistentFleet(t, "q-v005"), func(s *scenario) {
		disks := s.claimUIDs()
		stopOperator(s.ctx, t)
		defer startOperator(s.ctx, t)

		legacy := s.replaceWithV005StatefulSet()
		for _, i := range []int{2, 0} { // v0.0.5 created and its launcher released these Pods
			s.rollOntoV005(i)
		}
		retired := s.retireMember(2)
		s.holdByLauncher(1)
		s.requireV005Revision()
		s.writeLegacyReservationState()
		pods := s.podUIDs()
		// The operator recreates an OrderedReady StatefulSet with its Pods orphaned.
		s.expect("statefulsets/" + s.name)

		startOperator(s.ctx, t)
		waitFor(s.ctx, t, rollTimeout, func() bool {
			sts := &appsv1.StatefulSet{}
			err := env.Client.Get(s.ctx, client.ObjectKey{Namespace: fleetNamespace, Name: s.name}, sts)
			return err == nil && sts.UID != legacy && sts.Spec.PodManagementPolicy == appsv1.ParallelPodManagement &&
				sts.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType
		}, func() string {
			return "the operator recreates the OrderedReady StatefulSet as Parallel with RollingUpdate (podManagementPolicy is immutable)"
		})
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allReplaced(pods) && !s.anyCarries(legacyReleaseAnnotation) },
			func() string {
				return fmt.Sprintf("the rolling update replaces every v0.0.5 Pod, the gated and the denied one included (before %v, now %v)",
					pods, s.podUIDs())
			})
		s.settle(replicas)
		s.requireDisksRetained(disks) // nothing is replaced: the retired member is back on its old disk

		back := memberPod(s.ctx, t, s.member(2))
		if back.UID == retired {
			t.Fatalf("member %s must run in a new Pod, not the retired one (%s)", back.Name, retired)
		}
		st := s.memberState(back)
		if st.FreshDisk || st.RecoveredFrom != "" || st.Records == 0 {
			t.Fatalf("the retired member must rejoin on its old disk with its records; its state: %+v", st)
		}
		t.Logf("retired member %s rejoined in Pod %s on its disk with %d records", back.Name, back.UID, st.Records)
		res := &celldv1alpha1.CelldStorageReservation{}
		if err := env.Client.Get(s.ctx, client.ObjectKey{Name: "qual-" + s.name}, res); err != nil {
			t.Fatalf("read the reservation: %v", err)
		}
		if v, ok := res.Annotations[celldv1alpha1.AnnotationReservationState]; ok {
			t.Fatalf("the operator must drop the legacy reservation fields (no capacity history: no annotation); got %s", v)
		}
	})
}

// legacyReleaseAnnotation marks the v0.0.5 template, so a Pod from it is told
// from one the operator's template made.
const legacyReleaseAnnotation = "celld.eric.dev/legacy-release"

// retireMember does what the v0.0.5 launcher did to retire a member: it
// writes the startup-denial marker naming the member's Pod UID on its disk
// and stops it. celldsim then refuses every restart in that Pod; the claim
// is kept. It returns the retired Pod's UID.
func (s *scenario) retireMember(ordinal int) types.UID {
	s.t.Helper()
	p := memberPod(s.ctx, s.t, s.member(ordinal))
	pv := s.pvOf(s.claimOf(ordinal))
	if pv.Spec.Local == nil {
		s.t.Fatalf("volume %s is not a local volume on this host", pv.Name)
	}
	if err := os.WriteFile(filepath.Join(pv.Spec.Local.Path, denialMarker), []byte(string(p.UID)+"\n"), 0o644); err != nil {
		s.t.Fatalf("write the startup-denial marker on %s's disk: %v", p.Name, err)
	}
	before := restartCount(p, memberContainer)
	s.killWorkload(ordinal)
	waitFor(s.ctx, s.t, 3*time.Minute, func() bool {
		now := memberPod(s.ctx, s.t, p.Name)
		return now.UID == p.UID && restartCount(now, memberContainer) >= before+2 && !podReady(now)
	}, func() string {
		return "celldsim refuses to start, restart after restart, in the Pod its disk's denial marker names"
	})
	return p.UID
}

// replaceWithV005StatefulSet swaps the fleet's StatefulSet for the one v0.0.5
// created (OnDelete, OrderedReady, the launcher's gate in its template),
// orphaning and re-adopting the running Pods. It returns the new UID.
func (s *scenario) replaceWithV005StatefulSet() types.UID {
	s.t.Helper()
	cur := s.statefulSet()
	if err := env.Client.Delete(s.ctx, cur, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		s.t.Fatalf("delete StatefulSet %s, orphaning its Pods: %v", cur.Name, err)
	}
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		err := env.Client.Get(s.ctx, client.ObjectKeyFromObject(cur), &appsv1.StatefulSet{})
		return isNotFound(err)
	}, func() string { return "the StatefulSet is gone and its Pods orphaned" })
	legacy := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: cur.Name, Namespace: cur.Namespace,
		Labels: cur.Labels, OwnerReferences: cur.OwnerReferences}, Spec: *cur.Spec.DeepCopy()}
	legacy.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	legacy.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	tmpl := &legacy.Spec.Template
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[legacyReleaseAnnotation] = "v0.0.5"
	tmpl.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: celldv1alpha1.SchedulingGateLauncher}}
	if err := env.Client.Create(s.ctx, legacy); err != nil {
		s.t.Fatalf("create the v0.0.5 StatefulSet: %v", err)
	}
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		pods, err := memberPods(s.ctx, s.name)
		if err != nil || len(pods) != replicas {
			return false
		}
		for i := range pods {
			if o := metav1.GetControllerOf(&pods[i]); o == nil || o.UID != legacy.UID {
				return false
			}
		}
		return true
	}, func() string { return "the v0.0.5 StatefulSet adopts the fleet's Pods" })
	return legacy.UID
}

// rollOntoV005 replaces a member's Pod as v0.0.5 did under OnDelete: its
// new Pod comes from the v0.0.5 template, held by the launcher's gate until
// the launcher releases it, and turns Ready on the member's disk.
func (s *scenario) rollOntoV005(ordinal int) {
	s.t.Helper()
	old := memberPod(s.ctx, s.t, s.member(ordinal))
	deletePod(s, old.Name, nil)
	var held *corev1.Pod
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		p := &corev1.Pod{}
		err := env.Client.Get(s.ctx, client.ObjectKeyFromObject(old), p)
		held = p
		return err == nil && p.UID != old.UID && p.DeletionTimestamp == nil && gatedByLauncher(p)
	}, func() string { return "the v0.0.5 StatefulSet recreates " + old.Name + " held by the launcher's gate" })
	s.releaseByLauncher(held)
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		p := memberPod(s.ctx, s.t, old.Name)
		return p.UID == held.UID && podReady(p)
	}, func() string { return "member " + old.Name + ", released by the launcher, is Ready on its disk" })
}

// releaseByLauncher removes the launcher's scheduling gate from the Pod, as
// the v0.0.5 launcher did once it had configured the member.
func (s *scenario) releaseByLauncher(p *corev1.Pod) {
	s.t.Helper()
	for {
		var gates []corev1.PodSchedulingGate
		for _, g := range p.Spec.SchedulingGates {
			if g.Name != celldv1alpha1.SchedulingGateLauncher {
				gates = append(gates, g)
			}
		}
		p.Spec.SchedulingGates = gates
		err := env.Client.Update(s.ctx, p)
		if err == nil {
			return
		}
		if !isConflict(err) {
			s.t.Fatalf("release Pod %s from the launcher's gate: %v", p.Name, err)
		}
		p = memberPod(s.ctx, s.t, p.Name)
	}
}

func gatedByLauncher(p *corev1.Pod) bool {
	for _, g := range p.Spec.SchedulingGates {
		if g.Name == celldv1alpha1.SchedulingGateLauncher {
			return true
		}
	}
	return false
}

// requireV005Revision checks the setup left what v0.0.5 could: every member
// Pod carries the v0.0.5 StatefulSet's revision. A Pod left from the
// operator's own template would carry the revision the operator renders
// again, which the StatefulSet controller never replaces.
func (s *scenario) requireV005Revision() {
	s.t.Helper()
	var rev string
	waitFor(s.ctx, s.t, time.Minute, func() bool {
		sts := s.statefulSet()
		rev = sts.Status.UpdateRevision
		return sts.Status.ObservedGeneration == sts.Generation && rev != ""
	}, func() string { return "the v0.0.5 StatefulSet reports its revision" })
	pods, err := memberPods(s.ctx, s.name)
	if err != nil || len(pods) != replicas {
		s.t.Fatalf("test setup: want %d v0.0.5 member Pods, got %d (%v)", replicas, len(pods), err)
	}
	for _, p := range pods {
		if got := p.Labels[appsv1.ControllerRevisionHashLabelKey]; got != rev || p.Annotations[legacyReleaseAnnotation] == "" {
			s.t.Fatalf("test setup: Pod %s must come from the v0.0.5 template (revision %s), got revision %q", p.Name, rev, got)
		}
	}
}

// holdByLauncher stops a member so that its next Pod comes from the v0.0.5
// template and stays held by the launcher's scheduling gate.
func (s *scenario) holdByLauncher(ordinal int) {
	s.t.Helper()
	old := memberPod(s.ctx, s.t, s.member(ordinal))
	deletePod(s, old.Name, nil)
	waitFor(s.ctx, s.t, 2*time.Minute, func() bool {
		p := &corev1.Pod{}
		err := env.Client.Get(s.ctx, client.ObjectKeyFromObject(old), p)
		return err == nil && p.UID != old.UID && gatedByLauncher(p) && p.Spec.NodeName == ""
	}, func() string { return "the member's new Pod is held by the v0.0.5 launcher's scheduling gate" })
}

// writeLegacyReservationState puts v0.0.5's fields in the reservation
// annotation.
func (s *scenario) writeLegacyReservationState() {
	s.t.Helper()
	for {
		res := &celldv1alpha1.CelldStorageReservation{}
		if err := env.Client.Get(s.ctx, client.ObjectKey{Name: "qual-" + s.name}, res); err != nil {
			s.t.Fatalf("read the reservation: %v", err)
		}
		if res.Annotations == nil {
			res.Annotations = map[string]string{}
		}
		res.Annotations[celldv1alpha1.AnnotationReservationState] = legacyReservationState
		err := env.Client.Update(s.ctx, res)
		if err == nil {
			return
		}
		if !isConflict(err) {
			s.t.Fatalf("write the legacy reservation state: %v", err)
		}
	}
}

// celldsimState is the part of celldsim's GET /state the scenarios read.
type celldsimState struct {
	FreshDisk     bool   `json:"freshDisk"`
	RecoveredFrom string `json:"recoveredFrom"`
	Records       int    `json:"records"`
}

// memberState reads a member's celldsim /state on its Pod IP (the host
// routes to every node's Pods).
func (s *scenario) memberState(p *corev1.Pod) celldsimState {
	s.t.Helper()
	var st celldsimState
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s:8081/state", p.Status.PodIP))
	if err != nil {
		s.t.Fatalf("read the state of member %s: %v", p.Name, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		s.t.Fatalf("decode the state of member %s: %v", p.Name, err)
	}
	return st
}
