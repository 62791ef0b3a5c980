package e2e

// The Bucket profile (a Deployment on emptyDir) gets a rollout and a drain.
// celldsim has no bucket: its Bucket members keep every acknowledged record
// on all three members and recover from each other (see bucketFleet).

import (
	"testing"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func TestBucketFleetRolloutKeepsEveryWrite(t *testing.T) {
	runScenario(t, "Bucket: rollout (restart token)", bucketFleet(t, "q-brollout"), func(s *scenario) {
		pods := s.podUIDs()
		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) {
			f.Spec.Maintenance = &celldv1alpha1.Maintenance{RestartToken: "roll-1"}
		})
		waitFor(s.ctx, t, rollTimeout, func() bool { return s.allReplaced(pods) },
			func() string { return "a new restart token replaces every Bucket member" })
		s.settle(replicas)
	})
}

func TestBucketFleetNodeDrainKeepsEveryWrite(t *testing.T) {
	runScenario(t, "Bucket: node drain", bucketFleet(t, "q-bdrain"), func(s *scenario) {
		pods, err := memberPods(s.ctx, s.name)
		if err != nil || len(pods) == 0 {
			t.Fatalf("list Bucket members: %v", err)
		}
		node := pods[0].Spec.NodeName
		defer env.Kubectl(s.ctx, "uncordon", node)
		if out, err := env.Kubectl(s.ctx, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"); err != nil {
			t.Fatalf("drain %s: %v\n%s", node, err, out)
		}
		s.settle(replicas)
		if _, err := env.Kubectl(s.ctx, "uncordon", node); err != nil {
			t.Fatal(err)
		}
	})
}
