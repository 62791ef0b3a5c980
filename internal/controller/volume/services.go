package volume

// Replica Services: one selectorless Service per replica, named like it, so
// its DNS name is the replica's stable address and certificate SAN for life.
// The replica host publishes the Service's EndpointSlice (the NODE Pod's IP
// and the worker's port) before quorum, so Raft can form; that slice is the
// host's, not the controller's.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// replicaPortName names the worker's port on its Service.
const replicaPortName = "replica"

func (r *Reconciler) ensureService(ctx context.Context, rv *storagev1alpha1.ReplicatedVolume, vr *storagev1alpha1.VolumeReplica) error {
	want := r.servicePorts(vr)
	cur := &corev1.Service{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: vr.Name}, cur)
	if apierrors.IsNotFound(err) {
		meta := r.childMeta(rv, r.namespace, vr.Name)
		meta.Labels[storagev1alpha1.LabelReplica] = vr.Name
		svc := &corev1.Service{
			ObjectMeta: meta,
			Spec: corev1.ServiceSpec{
				Type:                     corev1.ServiceTypeClusterIP,
				Ports:                    want,
				PublishNotReadyAddresses: true,
			},
		}
		if err := r.client.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create replica service %s: %w", svc.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read replica service %s: %w", vr.Name, err)
	}
	if !ownedBy(cur, rv) {
		return fmt.Errorf("service %s/%s exists and is not volume %s's: left alone", cur.Namespace, cur.Name, rv.Name)
	}
	if len(cur.Spec.Selector) > 0 {
		return fmt.Errorf("replica service %s has a selector: a replica service must be selectorless (its host owns the endpoints)", cur.Name)
	}
	if len(cur.Spec.Ports) == 1 && cur.Spec.Ports[0].Port == want[0].Port && cur.Spec.Ports[0].TargetPort == want[0].TargetPort {
		return nil
	}
	cur.Spec.Ports = want
	if err := r.client.Update(ctx, cur); err != nil {
		return fmt.Errorf("set port %d on replica service %s: %w", vr.Spec.Port, cur.Name, err)
	}
	return nil
}

func (r *Reconciler) servicePorts(vr *storagev1alpha1.VolumeReplica) []corev1.ServicePort {
	return []corev1.ServicePort{{
		Name:       replicaPortName,
		Protocol:   corev1.ProtocolTCP,
		Port:       vr.Spec.Port,
		TargetPort: intstr.FromInt32(vr.Spec.Port),
	}}
}
