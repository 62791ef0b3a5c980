package e2e

// Volume deletion under a writer that just stopped: the claim's deletion
// reaches DeleteVolume, and the volume's objects go before the
// ReplicatedVolume (docs/volume-controller.md, "Deletion": workers close,
// release acknowledged, then backing claims, Services, EndpointSlices,
// Secrets and VolumeReplicas, then the volume), nothing left behind, the
// backing directories gone from the nodes.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

func TestStorageVolumeDeletionLeavesNothing(t *testing.T) {
	requirePower(t, cluster.PowerHostProcesses, cluster.PowerAuditLog)
	runVolumeScenario(t, "storage: volume deletion (order observed, nothing left)", "q-delete", func(s *volumeScenario) {
		s.serving("before the deletion")
		s.stopLoad()
		s.compareDigests()
		s.verify(s.pod)
		s.skipEnd = true
		// The storage controller removes the volume's claims and Services;
		// the PV is removed by the csi-provisioner sidecar, the storage
		// controller's identity too.
		s.allow("persistentvolumeclaims/*", "services/*", "endpointslices/*", "secrets/*", "volumereplicas/*",
			"replicatedvolumes/"+s.volume, "persistentvolumes/"+s.volume)
		s.expect("persistentvolumeclaims/*", "services/*")

		// The local driver names a backing directory by its CSI volume
		// handle (internal/csi/local, volumeID), under its data root, which
		// the local cluster keeps per node in .cluster/nodes/NODE/cellfleet.
		// Each is checked present now, so the check after the deletion
		// looks where the directories really are.
		var backingDirs []string
		for _, r := range s.replicas() {
			var c corev1.PersistentVolumeClaim
			if err := s.env().Get(s.ctx, client.ObjectKey{Namespace: storageNamespace, Name: r.Spec.BackingClaimName}, &c); err != nil {
				s.t.Fatalf("backing claim of %s: %v", r.Name, err)
			}
			var pv corev1.PersistentVolume
			if err := s.env().Get(s.ctx, client.ObjectKey{Name: c.Spec.VolumeName}, &pv); err != nil || pv.Spec.CSI == nil {
				s.t.Fatalf("backing volume %s of %s: %v (CSI source %v)", c.Spec.VolumeName, r.Name, err, pv.Spec.CSI)
			}
			dir := filepath.Join(env.Root, ".cluster", "nodes", r.Spec.Node, "cellfleet", "volumes", pv.Spec.CSI.VolumeHandle)
			if _, err := os.Stat(dir); err != nil {
				s.t.Fatalf("backing directory of %s not found where the local driver keeps it: %v", r.Name, err)
			}
			backingDirs = append(backingDirs, dir)
		}
		s.deletePod(s.pod)
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: storageTestNamespace, Name: s.name}}
		if err := s.env().Delete(s.ctx, claim); err != nil {
			s.t.Fatalf("delete claim %s: %v", s.name, err)
		}
		gone := s.watchVolumeObjectsGo()
		rvGone := gone["replicatedvolume"]
		for what, at := range gone {
			if what != "replicatedvolume" && what != "persistentvolume" && at.After(rvGone) {
				s.t.Errorf("%s went at %v, after the ReplicatedVolume (%v): the volume must be the last of its objects",
					what, at.Format(time.StampMilli), rvGone.Format(time.StampMilli))
			}
		}
		s.t.Logf("deletion order (first poll that saw each gone): %s", orderOf(gone))
		for _, dir := range backingDirs {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				s.t.Errorf("backing directory %s is left after the volume's deletion (%v)", dir, err)
			}
		}
		s.res.Acked, s.res.Replicas = s.ledger.Len(), s.res.Replicas+fmt.Sprintf("; %d backing directories seen, then checked gone", len(backingDirs))
	})
}

// watchVolumeObjectsGo polls until every object of the volume is gone and
// returns when each kind was first seen gone.
func (s *volumeScenario) watchVolumeObjectsGo() map[string]time.Time {
	s.t.Helper()
	gone := map[string]time.Time{}
	prefix := s.volume
	ns := client.InNamespace(storageNamespace)
	count := func(l client.ObjectList, names func() []string) int {
		if err := s.env().List(s.ctx, l, ns); err != nil {
			return -1
		}
		n := 0
		for _, name := range names() {
			if strings.HasPrefix(name, prefix) {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(storageSettle)
	for time.Now().Before(deadline) {
		var reps storagev1alpha1.VolumeReplicaList
		var svcs corev1.ServiceList
		var slices discoveryv1.EndpointSliceList
		var secrets corev1.SecretList
		var claims corev1.PersistentVolumeClaimList
		left := map[string]int{
			"volumereplicas": count(&reps, func() []string {
				return namesOf(reps.Items, func(r storagev1alpha1.VolumeReplica) string { return r.Spec.VolumeName })
			}),
			"services": count(&svcs, func() []string { return namesOf(svcs.Items, func(o corev1.Service) string { return o.Name }) }),
			"endpointslices": count(&slices, func() []string {
				return namesOf(slices.Items, func(o discoveryv1.EndpointSlice) string { return o.Name })
			}),
			"secrets": count(&secrets, func() []string { return namesOf(secrets.Items, func(o corev1.Secret) string { return o.Name }) }),
			"backing claims": count(&claims, func() []string {
				return namesOf(claims.Items, func(o corev1.PersistentVolumeClaim) string { return o.Name })
			}),
		}
		if apierrors.IsNotFound(s.env().Get(s.ctx, client.ObjectKey{Name: s.volume}, &storagev1alpha1.ReplicatedVolume{})) {
			left["replicatedvolume"] = 0
		} else {
			left["replicatedvolume"] = 1
		}
		if apierrors.IsNotFound(s.env().Get(s.ctx, client.ObjectKey{Name: s.volume}, &corev1.PersistentVolume{})) {
			left["persistentvolume"] = 0
		} else {
			left["persistentvolume"] = 1
		}
		all, now := true, time.Now() // one time per poll: kinds seen gone in one poll are simultaneous
		for what, n := range left {
			if n == 0 {
				if _, seen := gone[what]; !seen {
					gone[what] = now
				}
			} else {
				all = false
			}
		}
		if all {
			return gone
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("objects of volume %s left %v after its claim was deleted (gone so far: %s)", s.volume, storageSettle, orderOf(gone))
	return nil
}

func namesOf[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}

func orderOf(gone map[string]time.Time) string {
	type ev struct {
		what string
		at   time.Time
	}
	var evs []ev
	for w, at := range gone {
		evs = append(evs, ev{w, at})
	}
	for i := range evs {
		for j := i + 1; j < len(evs); j++ {
			if evs[j].at.Before(evs[i].at) {
				evs[i], evs[j] = evs[j], evs[i]
			}
		}
	}
	var parts []string
	for _, e := range evs {
		parts = append(parts, e.what+" "+e.at.Format("15:04:05.0"))
	}
	return strings.Join(parts, ", ")
}
