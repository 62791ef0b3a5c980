package nodestack

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/testenv"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// ProvisionClaims plays, for each backing claim of the volume, the local
// driver's csi-provisioner (distributed mode) and the PV controller:
// CreateVolume on the selected node's real local driver, a PV of
// local.storage.eric.dev with the returned volume handle and that node's
// affinity, bound to the claim. It returns once want claims are bound.
// Publication is the hosts' own: they ask the local driver for it.
func (s *Stack) ProvisionClaims(volumeName string, want int) {
	s.T.Helper()
	poll.Until(s.T, time.Minute, "every backing claim provisioned and bound", func() error {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := s.Env.Client.List(s.Ctx, claims, client.InNamespace(s.NS), client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName}); err != nil {
			return err
		}
		if len(claims.Items) != want {
			return fmt.Errorf("%d of %d backing claims exist", len(claims.Items), want)
		}
		for i := range claims.Items {
			if err := s.provision(&claims.Items[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ProvisionClaim provisions one backing claim, by name, as ProvisionClaims
// does: for a test that leaves another claim unprovisioned on purpose.
func (s *Stack) ProvisionClaim(name string) {
	s.T.Helper()
	poll.Until(s.T, time.Minute, "backing claim "+name+" provisioned and bound", func() error {
		c := &corev1.PersistentVolumeClaim{}
		if err := s.Env.Client.Get(s.Ctx, client.ObjectKey{Namespace: s.NS, Name: name}, c); err != nil {
			return err
		}
		return s.provision(c)
	})
}

// pvName is the PV the played provisioner makes for a claim.
func pvName(c *corev1.PersistentVolumeClaim) string { return "pv-" + string(c.UID) }

func (s *Stack) provision(c *corev1.PersistentVolumeClaim) error {
	if c.Spec.VolumeName != "" {
		return nil
	}
	n := s.NodeNamed(c.Annotations[storagev1alpha1.AnnotationSelectedNode])
	if n == nil {
		return fmt.Errorf("claim %s selects unknown node %q", c.Name, c.Annotations[storagev1alpha1.AnnotationSelectedNode])
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	name := pvName(c)
	resp, err := n.Driver.Controller().CreateVolume(s.Ctx, &csi.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size.Value()},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{local.TopologyKey: n.Name}}}},
	})
	if err != nil {
		return fmt.Errorf("local CreateVolume for claim %s on %s: %w", c.Name, n.Name, err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{storagev1alpha1.LabelVolume: c.Labels[storagev1alpha1.LabelVolume]}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			StorageClassName:              *c.Spec.StorageClassName,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: local.DriverName, VolumeHandle: resp.GetVolume().GetVolumeId(), VolumeAttributes: resp.GetVolume().GetVolumeContext()}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: local.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}},
			}}}},
		},
	}
	if err := s.Env.Client.Create(s.Ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	c.Spec.VolumeName = name
	if err := s.Env.Client.Update(s.Ctx, c); err != nil {
		return err
	}
	c.Status.Phase = corev1.ClaimBound
	c.Status.AccessModes = c.Spec.AccessModes
	c.Status.Capacity = pv.Spec.Capacity
	return s.Env.Client.Status().Update(s.Ctx, c)
}

// Reclaim plays the PV controller and csi-provisioner reclaiming the PVs of
// a volume whose claims are deleted and released: DeleteVolume
// on the node's local driver, which refuses while the volume is still
// exclusively published, then the PV's deletion. It returns how many PVs of
// the volume are left.
func (s *Stack) Reclaim(volumeName string) (int, error) {
	return s.reclaim(client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName})
}

// PlayProvisioner provisions every backing claim of the storage namespace
// and reclaims every released PV, as ProvisionClaims and Reclaim do, in the
// background until the test ends: for tests that create volumes they do
// not name (csi-sanity).
func (s *Stack) PlayProvisioner() {
	s.playInBackground(func(ctx context.Context) {
		claims := &corev1.PersistentVolumeClaimList{}
		if err := s.Env.Client.List(ctx, claims, client.InNamespace(s.NS), client.HasLabels{storagev1alpha1.LabelVolume}); err == nil {
			for i := range claims.Items {
				if c := &claims.Items[i]; c.DeletionTimestamp == nil {
					if err := s.provision(c); err != nil && ctx.Err() == nil {
						s.T.Logf("played provisioner: %v (retrying)", err)
					}
				}
			}
		}
		if _, err := s.reclaim(client.HasLabels{storagev1alpha1.LabelVolume}); err != nil && ctx.Err() == nil {
			s.T.Logf("played reclaim: %v (retrying)", err)
		}
	})
}

func (s *Stack) reclaim(sel client.ListOption) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := s.Env.Client.List(s.Ctx, pvs, sel); err != nil {
		return 0, err
	}
	left := 0
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		ref := pv.Spec.ClaimRef
		c := &corev1.PersistentVolumeClaim{}
		err := s.Env.Client.Get(s.Ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, c)
		switch {
		case err == nil && c.UID == ref.UID:
			// The PV controller waits for the claim to be gone: a deleted
			// one goes once its host's backing-use finalizer is off and
			// the played PVC protection controller let it (New).
			left++
			continue
		case err != nil && !apierrors.IsNotFound(err):
			return 0, err
		}
		node := ""
		for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
			node = term.MatchExpressions[0].Values[0]
		}
		n := s.NodeNamed(node)
		if n == nil {
			return 0, fmt.Errorf("PV %s on unknown node %q", pv.Name, node)
		}
		if _, err := n.Driver.Controller().DeleteVolume(s.Ctx, &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}); err != nil {
			return 0, fmt.Errorf("local DeleteVolume of PV %s on %s: %w", pv.Name, node, err)
		}
		uid := pv.UID
		if err := s.Env.Client.Delete(s.Ctx, pv, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	return left, nil
}

// playPVCProtection plays kube-controller-manager's PVC protection
// controller until the test ends: the volume controller waits for a deleted
// backing claim to be gone, which without it would never be.
func (s *Stack) playPVCProtection() {
	s.playInBackground(func(ctx context.Context) {
		if err := testenv.LiftPVCProtection(ctx, s.Env.Client, s.NS); err != nil && ctx.Err() == nil {
			s.T.Logf("played PVC protection: %v (retrying)", err)
		}
	})
}

// playInBackground runs step every playInterval until the test ends.
func (s *Stack) playInBackground(step func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(s.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			step(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(playInterval):
			}
		}
	}()
	s.T.Cleanup(func() { cancel(); <-done })
}

// playInterval is how often the played controllers look again: the real
// ones react about as fast.
const playInterval = 100 * time.Millisecond
