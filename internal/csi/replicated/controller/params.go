package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// ParameterKey is a key of the replicated StorageClass's parameters, as
// CreateVolume and GetCapacity receive them.
type ParameterKey string

// The StorageClass parameters. The two of the volume are named like the
// ReplicatedVolume spec fields they fill; the three csi.storage.k8s.io keys
// are what csi-provisioner adds with --extra-create-metadata.
const (
	// ParamReplicas is the replica count, 1 to 5 (default 3).
	ParamReplicas ParameterKey = "replicas"
	// ParamBackingStorageClassName is the StorageClass of the backing
	// claims (a local.storage.eric.dev class); it must exist.
	ParamBackingStorageClassName ParameterKey = "backingStorageClassName"
	// ParamPVCName and ParamPVCNamespace name the source claim.
	ParamPVCName      ParameterKey = "csi.storage.k8s.io/pvc/name"
	ParamPVCNamespace ParameterKey = "csi.storage.k8s.io/pvc/namespace"
	// ParamPVName is the PersistentVolume's name (the CSI name); accepted,
	// not needed.
	ParamPVName ParameterKey = "csi.storage.k8s.io/pv/name"
)

// knownParameters are every key CreateVolume accepts. Anything else is
// refused rather than ignored: a typo such as "replica: 5" must not yield a
// volume of the default three replicas.
var knownParameters = []ParameterKey{ParamBackingStorageClassName, ParamReplicas, ParamPVCName, ParamPVCNamespace, ParamPVName}

// volumeParameters are the parsed StorageClass parameters.
type volumeParameters struct {
	replicas     int32
	backingClass string
	source       storagev1alpha1.ClaimReference
}

// parseParameters validates the parameters; requireSource is false for
// GetCapacity, which the provisioner calls without a claim.
func parseParameters(params map[string]string, requireSource bool) (volumeParameters, error) {
	p := volumeParameters{replicas: storagev1alpha1.DefaultReplicas}
	for k := range params {
		if !slices.Contains(knownParameters, ParameterKey(k)) {
			return p, fmt.Errorf("unknown StorageClass parameter %q (known: %s)", k, knownList())
		}
	}
	if raw, ok := params[string(ParamReplicas)]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
		if err != nil || n < storagev1alpha1.MinReplicas || n > storagev1alpha1.MaxReplicas {
			return p, fmt.Errorf("StorageClass parameter %s=%q: must be an integer from %d to %d",
				ParamReplicas, raw, storagev1alpha1.MinReplicas, storagev1alpha1.MaxReplicas)
		}
		p.replicas = int32(n)
	}
	p.backingClass = params[string(ParamBackingStorageClassName)]
	if p.backingClass == "" && requireSource {
		return p, fmt.Errorf("StorageClass parameter %s is required: the StorageClass of the backing claims", ParamBackingStorageClassName)
	}
	if p.backingClass != "" {
		if errs := validation.IsDNS1123Subdomain(p.backingClass); len(errs) > 0 {
			return p, fmt.Errorf("StorageClass parameter %s=%q is not a StorageClass name: %s",
				ParamBackingStorageClassName, p.backingClass, strings.Join(errs, "; "))
		}
	}
	if !requireSource {
		return p, nil
	}
	p.source = storagev1alpha1.ClaimReference{Namespace: params[string(ParamPVCNamespace)], Name: params[string(ParamPVCName)]}
	for _, key := range []ParameterKey{ParamPVCName, ParamPVCNamespace} {
		if params[string(key)] == "" {
			return p, fmt.Errorf("parameter %s is missing: run csi-provisioner with --extra-create-metadata "+
				"so the volume records its source claim", key)
		}
	}
	if errs := validation.IsDNS1123Label(p.source.Namespace); len(errs) > 0 {
		return p, fmt.Errorf("parameter %s=%q is not a namespace: %s", ParamPVCNamespace, p.source.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(p.source.Name); len(errs) > 0 {
		return p, fmt.Errorf("parameter %s=%q is not a claim name: %s", ParamPVCName, p.source.Name, strings.Join(errs, "; "))
	}
	return p, nil
}

func knownList() string {
	s := make([]string, len(knownParameters))
	for i, k := range knownParameters {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
