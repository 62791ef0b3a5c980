package kubehost_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// A replica retired while its host is down, without that host's release
// acknowledgement (the volume controller's waiver for a host that is gone),
// stays published on its node: the local driver refuses to delete its
// volume. When the host comes back it finds the replica gone from the API
// and releases its publication itself, so the PV and its directory can go.
// The test plays the controller's waiver (stopped, so it does not recreate
// the replica): the replica deleted, its release finalizer removed without
// an acknowledgement, its claim reclaimed.
func TestAHostThatComesBackReleasesThePublicationOfAReplicaRetiredWithoutIt(t *testing.T) {
	fx := newFixture(t)
	n := fx.AddNode("kh-orphan-a")
	fx.StartControllerOnFreePorts()
	fx.StartHosts()
	rv := fx.volume("khorphan", 1)
	fx.ProvisionClaims(rv.Name, 1)
	poll.Until(t, 2*time.Minute, "the replica Ready", func() error {
		vrs := fx.replicas(rv.Name)
		if len(vrs) != 1 {
			return fmt.Errorf("%d replicas", len(vrs))
		}
		if c := meta.FindStatusCondition(vrs[0].Status.Conditions, storagev1alpha1.ReplicaReady.String()); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("replica %s not Ready: %+v", vrs[0].Name, c)
		}
		return nil
	})
	published := fx.checkPublished(rv.Name)
	volumeID := published[0].volumeID

	fx.StopController()
	fx.StopHost(n)
	fx.retireWithoutAcknowledgement(rv)
	if _, err := fx.Reclaim(rv.Name); err == nil {
		t.Fatal("the local driver deleted a volume its stopped host still holds published")
	}

	slices := fx.slicesOf(rv.Name)
	if len(slices) != 1 {
		t.Fatalf("the stopped host's EndpointSlices of %s: %d, want the retired replica's one", rv.Name, len(slices))
	}

	fx.RestartHost(n)
	poll.Until(t, time.Minute, "the returning host deleted the gone replica's EndpointSlice", func() error {
		if left := fx.slicesOf(rv.Name); len(left) > 0 {
			return fmt.Errorf("EndpointSlice %s left", left[0].Name)
		}
		return nil
	})
	poll.Until(t, time.Minute, "the returning host unpublished the gone replica's volume, so its PV and directory are deleted", func() error {
		left, err := fx.Reclaim(rv.Name)
		if err != nil {
			return err
		}
		if left != 0 {
			return fmt.Errorf("%d PVs of %s left", left, rv.Name)
		}
		vols, err := n.Driver.Controller().ListVolumes(fx.ctx, &csi.ListVolumesRequest{})
		if err != nil {
			return err
		}
		for _, e := range vols.GetEntries() {
			if e.GetVolume().GetVolumeId() == volumeID {
				return fmt.Errorf("the local driver still holds volume %s", volumeID)
			}
		}
		return nil
	})
	fx.checkUnpublished(published)
	if w := workersOn(t, n.Status); w != 0 {
		t.Errorf("the returning host runs %d workers for a replica that no longer exists", w)
	}
}

// slicesOf lists the EndpointSlices of the volume's replicas.
func (fx *fixture) slicesOf(volume string) []discoveryv1.EndpointSlice {
	fx.t.Helper()
	l := &discoveryv1.EndpointSliceList{}
	if err := env.Client.List(fx.ctx, l, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: volume}); err != nil {
		fx.t.Fatal(err)
	}
	return l.Items
}

// retireWithoutAcknowledgement plays the volume controller releasing the
// volume's replicas whose host is gone: each VolumeReplica deleted and its
// release finalizer removed with no acknowledgement, its claim's
// backing-use finalizer removed and the claim deleted (the stack plays the
// PVC protection controller), the volume's own finalizer removed.
func (fx *fixture) retireWithoutAcknowledgement(rv *storagev1alpha1.ReplicatedVolume) {
	fx.t.Helper()
	for _, vr := range fx.replicas(rv.Name) {
		if vr.Status.ReleasedClaimUID != "" {
			fx.t.Fatalf("replica %s acknowledged its release with its host stopped", vr.Name)
		}
		uid := vr.UID
		if err := env.Client.Delete(fx.ctx, &vr, client.Preconditions{UID: &uid}); err != nil {
			fx.t.Fatal(err)
		}
		fx.removeFinalizer(&vr, storagev1alpha1.FinalizerReplicaRelease)
		claim := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(fx.ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.BackingClaimName}, claim); err != nil {
			fx.t.Fatal(err)
		}
		fx.removeFinalizer(claim, storagev1alpha1.FinalizerBackingUse)
		cuid := claim.UID
		if err := env.Client.Delete(fx.ctx, claim, client.Preconditions{UID: &cuid}); err != nil {
			fx.t.Fatal(err)
		}
	}
	if err := env.Client.Delete(fx.ctx, rv); err != nil {
		fx.t.Fatal(err)
	}
	fx.removeFinalizer(rv, storagev1alpha1.FinalizerVolumeTeardown)
	poll.Until(fx.t, time.Minute, "the retired replica and its claim gone", func() error {
		if vrs := fx.replicas(rv.Name); len(vrs) > 0 {
			return fmt.Errorf("%d replicas left", len(vrs))
		}
		claims := &corev1.PersistentVolumeClaimList{}
		if err := env.Client.List(fx.ctx, claims, client.InNamespace(fx.ns), client.MatchingLabels{storagev1alpha1.LabelVolume: rv.Name}); err != nil {
			return err
		}
		if len(claims.Items) > 0 {
			return fmt.Errorf("%d claims left", len(claims.Items))
		}
		return nil
	})
}

// removeFinalizer removes f from obj as it is now on the API server.
func (fx *fixture) removeFinalizer(obj client.Object, f string) {
	fx.t.Helper()
	poll.Until(fx.t, 30*time.Second, "finalizer "+f+" removed from "+obj.GetName(), func() error {
		if err := env.Client.Get(fx.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if controllerutil.RemoveFinalizer(obj, f) {
			return env.Client.Update(fx.ctx, obj)
		}
		return nil
	})
}
