package volume

// Every object the controller creates carries the volume's label and a
// controller owner reference to the volume by UID. The UID, not the name,
// is the identity: an object left by an earlier volume of the same name is
// never adopted, and the garbage collector removes leftovers only once the
// ordered teardown has let the volume go.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// childMeta is the metadata of an object of rv.
func (r *Reconciler) childMeta(rv *storagev1alpha1.ReplicatedVolume, namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    map[string]string{storagev1alpha1.LabelVolume: rv.Name},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         storagev1alpha1.GroupVersion.String(),
			Kind:               "ReplicatedVolume",
			Name:               rv.Name,
			UID:                rv.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// ownedBy: obj's controller reference is rv, by UID.
func ownedBy(obj metav1.Object, rv *storagev1alpha1.ReplicatedVolume) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == rv.UID
}
