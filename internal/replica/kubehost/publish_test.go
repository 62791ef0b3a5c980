package kubehost_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
	"github.com/cellfleet/cellfleet/internal/testenv/nodestack"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// publishedReplica is one replica's backing publication as the local
// driver must hold it.
type publishedReplica struct {
	replica, volumeID, target string
	node                      *nodestack.Node
}

// checkPublished asserts that each replica's node's local driver holds a
// durable exclusive publication of the replica's PV, held by the host for
// that replica, at <consumer root>/<PV>, and that the bind is mounted.
func (fx *fixture) checkPublished(volumeName string) []publishedReplica {
	fx.t.Helper()
	var out []publishedReplica
	for _, vr := range fx.replicas(volumeName) {
		claim := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
			fx.t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, pv); err != nil {
			fx.t.Fatal(err)
		}
		n := fx.NodeNamed(vr.Spec.Node)
		p := publishedReplica{replica: vr.Name, volumeID: pv.Spec.CSI.VolumeHandle, target: filepath.Join(n.ConsumerRoot, pv.Name), node: n}
		recs, err := n.Publications()
		if err != nil {
			fx.t.Fatal(err)
		}
		found := false
		for _, r := range recs {
			if r.VolumeID == p.volumeID {
				found = true
				if r.Holder != holderOf(vr.Name) || r.TargetPath != p.target || r.ReadOnly {
					fx.t.Errorf("replica %s: the local driver's record %+v, want holder %q at %s, writable", vr.Name, r, holderOf(vr.Name), p.target)
				}
			}
		}
		if !found {
			fx.t.Errorf("replica %s runs, but the local driver of %s holds no publication record of volume %s (records %+v)", vr.Name, n.Name, p.volumeID, recs)
		}
		if ok, err := mountpath.IsMountPoint(mountpath.SelfMountInfo, p.target); err != nil || !ok {
			fx.t.Errorf("replica %s runs, but %s is not mounted (%v)", vr.Name, p.target, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		fx.t.Fatalf("volume %s has no replicas", volumeName)
	}
	return out
}

// checkUnpublished asserts the records are gone and the binds unmounted.
func (fx *fixture) checkUnpublished(ps []publishedReplica) {
	fx.t.Helper()
	for _, p := range ps {
		recs, err := p.node.Publications()
		if err != nil {
			fx.t.Fatal(err)
		}
		for _, r := range recs {
			if r.VolumeID == p.volumeID {
				fx.t.Errorf("replica %s released, but the local driver still records its publication %+v", p.replica, r)
			}
		}
		if ok, _ := mountpath.IsMountPoint(mountpath.SelfMountInfo, p.target); ok {
			fx.t.Errorf("replica %s released, but %s is still mounted", p.replica, p.target)
		}
	}
}

// unpublications is what the local drivers saw of the hosts' unpublication
// requests.
type unpublications struct {
	mu    sync.Mutex
	want  int
	calls map[string]int // by replica
	early []string       // acknowledgements already written when the host asked
}

// guardUnpublication makes each node's local driver check, when a host asks
// to unpublish a replica's backing volume, that the replica's release is not
// acknowledged yet: docs/volume-controller.md, "Deletion", orders worker
// close, unpublication, acknowledgement, and the manager reclaims the claim
// on reading the acknowledgement.
func (fx *fixture) guardUnpublication(ps []publishedReplica) *unpublications {
	u := &unpublications{want: len(ps), calls: map[string]int{}}
	byVolume := map[string]string{}
	for _, p := range ps {
		byVolume[p.volumeID] = p.replica
	}
	for _, n := range fx.Nodes {
		n.BeforeUnpublish(func(req *csi.NodeUnpublishVolumeRequest) {
			name, ok := byVolume[req.GetVolumeId()]
			if !ok {
				return
			}
			vr := &storagev1alpha1.VolumeReplica{}
			err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: name}, vr)
			u.mu.Lock()
			defer u.mu.Unlock()
			u.calls[name]++
			// Only the first request is ordered against the acknowledgement:
			// a pass that read a cached replica from before its own
			// acknowledgement asks again, which unpublishes nothing twice.
			switch {
			case u.calls[name] > 1:
			case apierrors.IsNotFound(err):
				u.early = append(u.early, name+" (already removed by the manager)")
			case err != nil:
				u.early = append(u.early, fmt.Sprintf("%s (unknown: %v)", name, err))
			case vr.Status.ReleasedClaimUID != "":
				u.early = append(u.early, name+" (releasedClaimUID "+vr.Status.ReleasedClaimUID+")")
			}
		})
	}
	fx.t.Cleanup(func() {
		for _, n := range fx.Nodes {
			n.BeforeUnpublish(nil)
		}
	})
	return u
}

func (u *unpublications) check(t *testing.T) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.calls) != u.want {
		t.Errorf("the local drivers were asked to unpublish %d of %d replicas' backing volumes: %v", len(u.calls), u.want, u.calls)
	}
	if len(u.early) > 0 {
		t.Errorf("a host acknowledged the release before unpublishing the backing volume: %v", u.early)
	}
}

// A host refuses a backing PV that is not the local driver's, with the
// Published condition saying why, and never starts its worker.
func TestAHostRefusesABackingVolumeOfAnotherDriver(t *testing.T) {
	fx := newFixture(t)
	fx.AddNode("kh-refuse-a")
	fx.StartControllerOnFreePorts()
	fx.StartHosts()
	rv := fx.volume("khrefuse", 1)
	var claim corev1.PersistentVolumeClaim
	poll.Until(t, time.Minute, "the backing claim", func() error {
		l := &corev1.PersistentVolumeClaimList{}
		if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d claims", len(l.Items))
		}
		claim = l.Items[0]
		return nil
	})
	// Bound to a PV of another CSI driver (as if bound by hand).
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-other-" + string(claim.UID)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes: claim.Spec.AccessModes, StorageClassName: *claim.Spec.StorageClassName,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "other.example.com", VolumeHandle: "h-1"}},
		},
	}
	if err := env.Client.Create(fx.ctx, pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(fx.ctx, pv) })
	claim.Spec.VolumeName = pv.Name
	if err := env.Client.Update(fx.ctx, &claim); err != nil {
		t.Fatal(err)
	}
	claim.Status.Phase = corev1.ClaimBound
	if err := env.Client.Status().Update(fx.ctx, &claim); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "Published=False PublicationRefused naming the driver", func() error {
		vrs := fx.replicas(rv.Name)
		if len(vrs) != 1 {
			return fmt.Errorf("%d replicas", len(vrs))
		}
		c := meta.FindStatusCondition(vrs[0].Status.Conditions, storagev1alpha1.ReplicaPublished.String())
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(storagev1alpha1.ReasonPublicationRefused) ||
			!containsAll(c.Message, "other.example.com", "local.storage.eric.dev", pv.Name) {
			return fmt.Errorf("Published %+v", c)
		}
		return nil
	})
	if w := workersOn(t, fx.Nodes[0].Status); w != 0 {
		t.Errorf("the host runs %d workers on a refused backing volume", w)
	}
	if recs, err := fx.Nodes[0].Publications(); err != nil || len(recs) != 0 {
		t.Errorf("the local driver holds publications %+v (%v) for a refused volume", recs, err)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// A replica whose backing PV was deleted from the API while it ran (a lost
// backing volume) is still unpublished on release: the host takes the local
// driver's volume ID from its own publication record, so it acknowledges
// the release and the manager can reclaim the claim. Without the record it
// left the volume published and never acknowledged (found on the cluster).
func TestAHostUnpublishesABackingVolumeWhosePVIsGoneAndAcknowledges(t *testing.T) {
	fx := newFixture(t)
	fx.AddNode("kh-pvgone-a")
	fx.StartControllerOnFreePorts()
	fx.StartHosts()
	rv := fx.volume("khpvgone", 1)
	fx.ProvisionClaims(rv.Name, 1)
	fx.waitReady(rv.Name)
	published := fx.checkPublished(rv.Name)
	vr := fx.replicas(rv.Name)[0]
	claim := fx.loseClaim(vr)

	acks := fx.watchAcks(rv.Name)
	if err := env.Client.Delete(fx.ctx, rv); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Minute, "the release of the replica whose PV is gone acknowledged", func() error {
		if got := acks()[vr.Name]; got != string(claim.UID) {
			cur := fx.replicas(rv.Name)
			if len(cur) == 1 {
				return fmt.Errorf("acknowledgement %q; Released %+v", got,
					meta.FindStatusCondition(cur[0].Status.Conditions, storagev1alpha1.ReplicaReleased.String()))
			}
			return fmt.Errorf("acknowledgement %q, want the claim's UID %s", got, claim.UID)
		}
		return nil
	})
	fx.checkUnpublished(published)
}
