package e2e

// Qualification (docs/local-cluster.md, "Qualification (`make e2e`)"; results
// in docs/qualification.md): member faults the fleet survives on its own
// disks — graceful and forced Pod deletes, kill -9 of the workload (one
// member and every member at once), every member Pod deleted at once, and a
// node drain held by the disruption budget. The operator deletes nothing.

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

func TestMemberFaultsKeepEveryWriteAndDisk(t *testing.T) {
	cases := []struct {
		title, fleet string
		fault        func(s *scenario)
		needs        []cluster.Power
	}{
		{"graceful Pod delete", "q-poddel", func(s *scenario) { deletePod(s, s.member(1), nil) }, nil},
		{"forced Pod delete", "q-podforce", func(s *scenario) { deletePod(s, s.member(1), ptr.To(int64(0))) }, nil},
		{"every member Pod deleted at once", "q-podall", func(s *scenario) {
			for i := range replicas {
				deletePod(s, s.member(i), nil)
			}
		}, nil},
		{"kill -9 of the workload", "q-kill", func(s *scenario) { s.killWorkload(2) }, []cluster.Power{cluster.PowerHostProcesses}},
		{"kill -9 of the workload on every member at once", "q-killall", func(s *scenario) {
			for i := range replicas {
				s.killWorkload(i)
			}
		}, []cluster.Power{cluster.PowerHostProcesses}},
	}
	for _, tc := range cases {
		t.Run(tc.fleet, func(t *testing.T) {
			requirePower(t, tc.needs...)
			runScenario(t, tc.title, persistentFleet(t, tc.fleet), func(s *scenario) {
				disks, pods, restarts := s.claimUIDs(), s.podUIDs(), s.restarts()
				tc.fault(s)
				waitFor(s.ctx, t, 2*time.Minute, func() bool { return s.anyReplaced(pods) || s.restarted(restarts) },
					func() string { return "the fault takes effect (a member restarts)" })
				s.settle(replicas)
				s.requireDisksRetained(disks)
			})
		})
	}
}

func TestNodeDrainIsHeldByTheDisruptionBudget(t *testing.T) {
	runScenario(t, "node drain held by the budget", persistentFleet(t, "q-drain"), func(s *scenario) {
		disks := s.claimUIDs()
		first, second := s.nodeOf(0), s.nodeOf(1)
		defer env.Kubectl(s.ctx, "uncordon", first, second)
		if out, err := env.Kubectl(s.ctx, "drain", first, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s"); err != nil {
			t.Fatalf("the first drain must evict one member within the budget: %v\n%s", err, out)
		}
		survivor := memberPod(s.ctx, t, s.member(1))
		if _, err := env.Kubectl(s.ctx, "drain", second, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=15s"); err == nil {
			t.Fatal("a second drain evicted another member while one was down: the budget (maxUnavailable 1) must hold it")
		}
		if p := memberPod(s.ctx, t, s.member(1)); p.UID != survivor.UID || p.DeletionTimestamp != nil {
			t.Fatal("the held drain still removed member 1")
		}
		if _, err := env.Kubectl(s.ctx, "uncordon", first, second); err != nil {
			t.Fatal(err)
		}
		s.settle(replicas)
		s.requireDisksRetained(disks)
	})
}

// restarts maps each member Pod to its container restart count.
func (s *scenario) restarts() map[string]int32 {
	pods, err := memberPods(s.ctx, s.name)
	if err != nil {
		s.t.Fatalf("list member Pods: %v", err)
	}
	out := map[string]int32{}
	for i := range pods {
		out[pods[i].Name] = restartCount(&pods[i], memberContainer)
	}
	return out
}

// restarted reports whether any member's container restarted since before.
func (s *scenario) restarted(before map[string]int32) bool {
	for name, n := range s.restarts() {
		if n > before[name] {
			return true
		}
	}
	return false
}

// pvOf is the PersistentVolume bound to a claim.
func (s *scenario) pvOf(claimName string) *corev1.PersistentVolume {
	s.t.Helper()
	c := claim(s.ctx, s.t, claimName)
	if c == nil || c.Spec.VolumeName == "" {
		s.t.Fatalf("claim %s is not bound", claimName)
	}
	pv := &corev1.PersistentVolume{}
	if err := env.Client.Get(s.ctx, client.ObjectKey{Name: c.Spec.VolumeName}, pv); err != nil {
		s.t.Fatalf("read volume of %s: %v", claimName, err)
	}
	return pv
}

// processesOf lists the host pids of a member Pod's workload.
func processesOf(p *corev1.Pod) ([]int, error) { return cluster.ContainerProcesses(p.UID, "celldsim") }
