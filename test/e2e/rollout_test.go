package e2e

// Qualification (docs/local-cluster.md, "Qualification (`make e2e`)"; results
// in docs/qualification.md): a rolling restart and a runtime upgrade on
// retained disks, an operator restart in the middle of a rollout and of a
// contraction, and adoption of a StatefulSet an earlier release created with
// OnDelete. The operator deletes nothing in any of them: the StatefulSet
// controller performs every restart.

import (
	"context"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

// rollTimeout bounds a rollout of three members.
const rollTimeout = 5 * time.Minute

func TestRollingRestartByRestartTokenKeepsEveryWriteAndDisk(t *testing.T) {
	runScenario(t, "rolling restart (restart token)", persistentFleet(t, "q-restart"), func(s *scenario) {
		disks, pods := s.claimUIDs(), s.podUIDs()
		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) {
			f.Spec.Maintenance = &celldv1alpha1.Maintenance{RestartToken: "roll-1"}
		})
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allReplaced(pods) },
			func() string { return "a new restart token restarts every member" })
		s.settle(replicas)
		s.requireDisksRetained(disks)
	})
}

func TestRuntimeUpgradeToANewDigestKeepsEveryWriteAndDisk(t *testing.T) {
	runScenario(t, "runtime upgrade (new image digest)", persistentFleet(t, "q-upgrade"), func(s *scenario) {
		disks := s.claimUIDs()
		image := runtimeImage(t, 2)
		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) { f.Spec.RuntimeImage = image })
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allRun(image) },
			func() string { return "every member runs the new runtime image " + image })
		s.settle(replicas)
		s.requireDisksRetained(disks)
	})
}

func TestOperatorRestartInTheMiddleOfARolloutConverges(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses) // kill -9 of the operator
	runScenario(t, "operator restart mid-rollout", persistentFleet(t, "q-oprollout"), func(s *scenario) {
		disks, pods := s.claimUIDs(), s.podUIDs()
		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) {
			f.Spec.Maintenance = &celldv1alpha1.Maintenance{RestartToken: "roll-1"}
		})
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.anyReplaced(pods) },
			func() string { return "the rollout starts" })
		killOperator(s.ctx, t)
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allReplaced(pods) },
			func() string { return "the rollout completes after the operator restarted" })
		s.settle(replicas)
		s.requireDisksRetained(disks)
	})
}

func TestOperatorRestartInTheMiddleOfAContractionConverges(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses) // kill -9 of the operator
	f := persistentFleet(t, "q-opcontract")
	// Four members on a three-node cluster need relaxed host spreading, and
	// the two left after the contraction cannot span three zones: two zones,
	// Relaxed, so the scenario tests the contraction and not the scheduler.
	f.Spec.Placement = &celldv1alpha1.Placement{Zones: zones[:2], AZCount: 2, Mode: celldv1alpha1.PlacementRelaxed}
	f.Spec.Replicas = 4
	runScenario(t, "operator restart mid-contraction", f, func(s *scenario) {
		disks := s.claimUIDs()
		// Contraction removes one member per step: 4 → 3 → 2. The operator is
		// killed after the first step, so the second is left to the new one.
		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.statefulSetReplicas() == 3 },
			func() string { return "the operator applies the first contraction step (4 → 3) to the StatefulSet" })
		killOperator(s.ctx, t)
		if got := s.statefulSetReplicas(); got != 3 {
			t.Fatalf("test setup: the operator must be killed between the contraction steps; the StatefulSet has %d replicas", got)
		}
		s.settle(2)
		s.requireDisksRetained(disks) // both removed members keep their disks
	})
}

func TestAdoptedOnDeleteStatefulSetRollsToRollingUpdateWithoutLosingADisk(t *testing.T) {
	runScenario(t, "adoption of an OnDelete StatefulSet", persistentFleet(t, "q-adopt"), func(s *scenario) {
		disks := s.claimUIDs()
		// What an earlier release left: OnDelete, its own template, Pods from that template.
		stopOperator(s.ctx, t)
		defer startOperator(s.ctx, t)
		patchStatefulSet(s, func(sts *appsv1.StatefulSet) {
			sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			delete(sts.Annotations, "celld.eric.dev/template-hash")
			if sts.Spec.Template.Annotations == nil {
				sts.Spec.Template.Annotations = map[string]string{}
			}
			sts.Spec.Template.Annotations[legacyReleaseAnnotation] = "v0.0.5"
		})
		for i := range replicas { // OnDelete: the earlier release's Pods come from its template
			deletePod(s, s.member(i), nil)
		}
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allCarry(legacyReleaseAnnotation) },
			func() string { return "every member runs the earlier release's template" })
		s.settle(replicas)
		legacy := s.podUIDs()

		startOperator(s.ctx, t)
		waitFor(s.ctx, t, rollTimeout, func() bool {
			sts := s.statefulSet()
			return sts.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType
		}, func() string { return "the operator switches an adopted StatefulSet from OnDelete to RollingUpdate" })
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allReplaced(legacy) && !s.anyCarries(legacyReleaseAnnotation) },
			func() string {
				return "the rolling update replaces every member of the earlier release with the current template"
			})
		s.settle(replicas)
		s.requireDisksRetained(disks)
	})
}

// statefulSet reads the fleet's StatefulSet.
func (s *scenario) statefulSet() *appsv1.StatefulSet {
	s.t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(s.ctx, client.ObjectKey{Namespace: fleetNamespace, Name: s.name}, sts); err != nil {
		s.t.Fatalf("read StatefulSet %s: %v", s.name, err)
	}
	return sts
}

func (s *scenario) statefulSetReplicas() int32 {
	sts := s.statefulSet()
	if sts.Spec.Replicas == nil {
		return 1
	}
	return *sts.Spec.Replicas
}

// patchStatefulSet edits the StatefulSet as an earlier release would have.
func patchStatefulSet(s *scenario, change func(*appsv1.StatefulSet)) {
	s.t.Helper()
	for {
		sts := s.statefulSet()
		change(sts)
		err := env.Client.Update(s.ctx, sts)
		if err == nil {
			return
		}
		if !isConflict(err) {
			s.t.Fatalf("update StatefulSet %s: %v", s.name, err)
		}
	}
}

// allRun reports whether every member Pod runs image.
func (s *scenario) allRun(image string) bool {
	pods, err := memberPods(s.ctx, s.name)
	if err != nil || len(pods) == 0 {
		return false
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image {
			return false
		}
	}
	return true
}

// allCarry / anyCarries report whether member Pods carry a template annotation.
func (s *scenario) allCarry(annotation string) bool {
	pods, err := memberPods(s.ctx, s.name)
	if err != nil || len(pods) != replicas {
		return false
	}
	for _, p := range pods {
		if _, ok := p.Annotations[annotation]; !ok || p.DeletionTimestamp != nil {
			return false
		}
	}
	return true
}

func (s *scenario) anyCarries(annotation string) bool {
	pods, err := memberPods(s.ctx, s.name)
	if err != nil {
		s.t.Fatalf("list the member Pods: %v", err)
	}
	for _, p := range pods {
		if _, ok := p.Annotations[annotation]; ok {
			return true
		}
	}
	return false
}

// deletePod deletes a member Pod as an administrator (grace nil = the Pod's own).
func deletePod(s *scenario, name string, grace *int64) {
	s.t.Helper()
	p := &corev1.Pod{}
	p.Name, p.Namespace = name, fleetNamespace
	opts := []client.DeleteOption{}
	if grace != nil {
		opts = append(opts, client.GracePeriodSeconds(*grace))
	}
	if err := env.Client.Delete(s.ctx, p, opts...); err != nil && !isNotFound(err) {
		s.t.Fatalf("delete Pod %s: %v", name, err)
	}
}

// stopOperator scales the manager to zero and waits until no manager Pod runs.
func stopOperator(ctx context.Context, t *testing.T) { scaleOperator(ctx, t, 0) }

// startOperator scales the manager back to one available replica.
func startOperator(ctx context.Context, t *testing.T) { scaleOperator(ctx, t, 1) }

func scaleOperator(ctx context.Context, t *testing.T, n int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	key := client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}
	for {
		if err := env.Client.Get(ctx, key, d); err != nil {
			t.Fatalf("read the manager Deployment: %v", err)
		}
		d.Spec.Replicas = &n
		err := env.Client.Update(ctx, d)
		if err == nil {
			break
		}
		if !isConflict(err) {
			t.Fatalf("scale the manager to %d: %v", n, err)
		}
	}
	waitFor(ctx, t, 2*time.Minute, func() bool {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(managerNamespace),
			client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
			return false
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready++
			}
		}
		return len(pods.Items) == int(n) && ready == int(n)
	}, func() string { return "the manager runs " + strconv.Itoa(int(n)) + " Ready replicas" })
}
