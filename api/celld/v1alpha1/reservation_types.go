package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetReference names one CelldFleet, down to its UID, so a fleet recreated
// under the same name does not inherit its predecessor's bucket.
type FleetReference struct {
	// namespace of the fleet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.fleet.namespace must be a DNS label",messageExpression="'spec.fleet.namespace ' + self + ' must be a DNS label'"
	Namespace string `json:"namespace"`

	// name of the fleet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// uid of the fleet.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
}

// CelldStorageReservationSpec records which fleet owns a bucket. It is
// immutable: a bucket changes owner only by deleting the reservation.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: a bucket changes owner only by deleting its reservation"
type CelldStorageReservationSpec struct {
	// bucket is the reserved S3 bucket; it must equal the reservation's name.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="spec.bucket must be an S3 bucket name: lowercase letters, digits, '.' and '-', starting and ending with a letter or digit",messageExpression="'spec.bucket ' + self + ' must be an S3 bucket name: lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit'"
	Bucket string `json:"bucket"`

	// fleet is the fleet that owns the bucket.
	// +required
	Fleet FleetReference `json:"fleet"`
}

// CelldStorageReservation reserves a bucket for one fleet. Its name is the
// bucket's name, so the API server itself refuses a second reservation of
// the same bucket. The operator keeps the fleet's capacity history in its
// annotation (AnnotationReservationState) and keeps the reservation when the
// fleet is deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=csr,categories=celld
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.bucket",message="metadata.name must equal spec.bucket: a bucket has exactly one reservation"
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucket`
// +kubebuilder:printcolumn:name="Fleet-Namespace",type=string,JSONPath=`.spec.fleet.namespace`
// +kubebuilder:printcolumn:name="Fleet",type=string,JSONPath=`.spec.fleet.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CelldStorageReservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec records which fleet owns the bucket.
	// +required
	Spec CelldStorageReservationSpec `json:"spec"`
}

// CelldStorageReservationList is a list of CelldStorageReservations.
//
// +kubebuilder:object:root=true
type CelldStorageReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CelldStorageReservation `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CelldStorageReservation{}, &CelldStorageReservationList{})
}
