// Package v1alpha1 contains the storage.eric.dev/v1alpha1 API: ReplicatedVolume,
// the cluster-scoped application-facing replicated volume, and VolumeReplica,
// one replica of it hosted by a node's replica host.
//
// The package holds types, schema markers and constants only; it must never
// import controller code.
//
// +kubebuilder:object:generate=true
// +groupName=storage.eric.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "storage.eric.dev", Version: "v1alpha1"}

	// SchemeBuilder registers this API's types with a scheme.
	//
	//lint:ignore SA1019 kubebuilder's layout: types register themselves in init(); the only cost is a controller-runtime import in the API package
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
