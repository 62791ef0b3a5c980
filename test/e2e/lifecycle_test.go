package e2e

// Qualification (docs/local-cluster.md, "Qualification (`make e2e`)"; results
// in docs/qualification.md): scale-in keeps the removed member's disk and
// scale-out reattaches it; fleet deletion removes compute, then disks, and
// keeps the storage reservation.

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

func TestScaleInKeepsTheDiskAndScaleOutReattachesIt(t *testing.T) {
	f := persistentFleet(t, "q-scale")
	f.Spec.Placement = nil // two members cannot span three zones
	runScenario(t, "scale-in keeps the disk, scale-out reattaches it", f, func(s *scenario) {
		disks := s.claimUIDs()
		removed := s.claimOf(2)
		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 2 })
		s.settle(2)
		s.requireDisksRetained(disks)
		s.serving("after the scale-in")

		updateFleet(s.ctx, t, s.name, func(f *celldv1alpha1.CelldFleet) { f.Spec.Replicas = 3 })
		s.settle(replicas)
		s.requireDisksRetained(disks)
		p := memberPod(s.ctx, t, s.member(2))
		if !mountsClaim(p, removed) {
			t.Fatalf("the member added back does not reattach its kept disk %s", removed)
		}
	})
}

func TestFleetDeletionRemovesComputeThenDisksAndKeepsTheReservation(t *testing.T) {
	requirePower(t, cluster.PowerAuditLog) // the operator's deletes are the assertion
	runScenario(t, "fleet deletion: compute, then disks; reservation kept", persistentFleet(t, "q-delete"), func(s *scenario) {
		s.allow("pods/*", "persistentvolumeclaims/*", "statefulsets/*", "services/*", "poddisruptionbudgets/*")
		disks := s.claimUIDs()
		for name := range disks {
			s.expect("persistentvolumeclaims/" + name)
		}
		// The writes are read back while the fleet still exists.
		s.serving("before the deletion")
		s.gen.Stop()
		s.verify()
		s.skipEnd = true

		f := getFleet(s.ctx, t, s.name)
		if err := env.Client.Delete(s.ctx, f); err != nil {
			t.Fatalf("delete fleet: %v", err)
		}
		// Watch the order: no claim may start deleting while a member Pod exists.
		deadline := time.Now().Add(4 * time.Minute)
		for {
			pods, err := memberPods(s.ctx, s.name)
			if err != nil {
				t.Fatalf("list the member Pods during the deletion: %v", err)
			}
			claimsGoing, claimsLeft := 0, 0
			for name := range disks {
				c := claim(s.ctx, t, name)
				if c != nil {
					claimsLeft++
					if c.DeletionTimestamp != nil {
						claimsGoing++
					}
				}
			}
			if claimsGoing > 0 && len(pods) > 0 {
				t.Fatalf("a disk was being deleted while %d member Pods still existed: compute goes first", len(pods))
			}
			gone := isNotFound(env.Client.Get(s.ctx, client.ObjectKeyFromObject(f), &celldv1alpha1.CelldFleet{}))
			if gone && claimsLeft == 0 && len(pods) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fleet deletion incomplete after 4m: fleet gone %v, %d Pods, %d claims left", gone, len(pods), claimsLeft)
			}
			time.Sleep(100 * time.Millisecond)
		}
		var res celldv1alpha1.CelldStorageReservationList
		if err := env.Client.List(s.ctx, &res); err != nil {
			t.Fatal(err)
		}
		kept := false
		for _, r := range res.Items {
			kept = kept || r.Spec.Bucket == f.Spec.Storage.Bucket
		}
		if !kept {
			t.Fatalf("fleet deletion removed the storage reservation of bucket %s: it must be kept", f.Spec.Storage.Bucket)
		}
	})
}

// mountsClaim reports whether the Pod mounts the named claim.
func mountsClaim(p *corev1.Pod, claimName string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claimName {
			return true
		}
	}
	return false
}
