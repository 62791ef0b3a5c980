package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
)

// The commit point of CreateVolume is the ReplicatedVolume's creation: until
// it exists, a refusal leaves nothing behind; once it exists, every retry
// with the same name and parameters finds it (VolumeName is a pure function
// of the CSI name) and only waits. The capacity limit is checked before the
// commit point only: afterwards the volume's own backing claims consume the
// nodes' capacity, and a retry must not be refused for that.

// maxCSINameLength bounds the CSI name (the CSI spec's 128 bytes).
const maxCSINameLength = 128

// CreateVolume records the volume and returns it once it is Placed and Ready.
func (c *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	switch {
	case name == "":
		return nil, status.Error(codes.InvalidArgument, "CreateVolume: name is required")
	case len(name) > maxCSINameLength:
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume: name of %d bytes exceeds the CSI limit of %d", len(name), maxCSINameLength)
	case req.GetVolumeContentSource() != nil:
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: volume content sources (snapshots, clones) are not supported", name)
	}
	want, err := c.wantedSpec(ctx, req)
	if err != nil {
		return nil, err
	}
	id := VolumeName(name)
	log := c.log.With("volume", id, "csiName", name)

	rv, err := c.getVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if rv == nil {
		if err := c.checkLimit(ctx, "CreateVolume "+name, want.BackingStorageClassName, want.Replicas, want.Capacity.Value()); err != nil {
			return nil, err
		}
		if rv, err = c.createVolume(ctx, id, name, want); err != nil {
			return nil, err
		}
		log.Info("csi controller: volume recorded", "replicas", want.Replicas, "capacity", want.Capacity.String(),
			"accessMode", want.AccessMode, "backingClass", want.BackingStorageClassName,
			"claim", want.Source.Namespace+"/"+want.Source.Name)
	}
	if msg := incompatibility(rv, name, want, req.GetCapacityRange()); msg != "" {
		return nil, status.Errorf(codes.AlreadyExists, "CreateVolume %s: volume %s exists with other parameters: %s", name, id, msg)
	}
	rv, err = c.awaitVolume(ctx, id, "CreateVolume "+name, servesWithQuorum)
	if err != nil {
		return nil, err
	}
	vctx, err := c.volumeContext(ctx, rv)
	if err != nil {
		return nil, err
	}
	log.Info("csi controller: volume ready")
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: id, CapacityBytes: rv.Spec.Capacity.Value(), VolumeContext: vctx}}, nil
}

// wantedSpec validates the request and returns the spec it asks for; every
// refusal is INVALID_ARGUMENT or OUT_OF_RANGE naming the value.
func (c *Controller) wantedSpec(ctx context.Context, req *csi.CreateVolumeRequest) (storagev1alpha1.ReplicatedVolumeSpec, error) {
	name := req.GetName()
	var spec storagev1alpha1.ReplicatedVolumeSpec
	mode, err := accessModeFor(req.GetVolumeCapabilities())
	if err != nil {
		return spec, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", name, err)
	}
	bytes, err := requestedBytes(req.GetCapacityRange())
	if err != nil {
		return spec, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", name, err)
	}
	p, err := parseParameters(req.GetParameters(), true)
	if err != nil {
		return spec, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", name, err)
	}
	if err := c.checkBackingClass(ctx, "CreateVolume "+name, p.backingClass); err != nil {
		return spec, err
	}
	return storagev1alpha1.ReplicatedVolumeSpec{
		AccessMode:              mode,
		Replicas:                p.replicas,
		Capacity:                *resource.NewQuantity(bytes, resource.BinarySI),
		BackingStorageClassName: p.backingClass,
		Source:                  p.source,
	}, nil
}

// checkBackingClass refuses a backing class that does not exist, or that is
// the replicated driver's own (its replicas would be replicated volumes).
func (c *Controller) checkBackingClass(ctx context.Context, rpc, name string) error {
	_, err := c.backingClass(ctx, rpc, name)
	return err
}

// backingClass reads the backing StorageClass.
func (c *Controller) backingClass(ctx context.Context, rpc, name string) (*storagev1.StorageClass, error) {
	var sc storagev1.StorageClass
	err := c.reader.Get(ctx, client.ObjectKey{Name: name}, &sc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, status.Errorf(codes.InvalidArgument, "%s: backing StorageClass %q (parameter %s) does not exist",
			rpc, name, ParamBackingStorageClassName)
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "%s: read backing StorageClass %q: %v", rpc, name, err)
	case sc.Provisioner == replicated.DriverName:
		return nil, status.Errorf(codes.InvalidArgument, "%s: backing StorageClass %q is provisioned by %s itself; "+
			"backing claims need a node-local class (local.storage.eric.dev)", rpc, name, replicated.DriverName)
	}
	return &sc, nil
}

// getVolume reads the volume; nil without error when it does not exist.
func (c *Controller) getVolume(ctx context.Context, id string) (*storagev1alpha1.ReplicatedVolume, error) {
	rv := &storagev1alpha1.ReplicatedVolume{} // decoded into an empty object: absent fields stay absent
	err := c.reader.Get(ctx, client.ObjectKey{Name: id}, rv)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "read ReplicatedVolume %s: %v", id, err)
	}
	return rv, nil
}

// createVolume creates the ReplicatedVolume; losing a race to a concurrent
// call with the same name returns the winner's object, which the caller
// then compares like any existing one.
func (c *Controller) createVolume(ctx context.Context, id, csiName string, spec storagev1alpha1.ReplicatedVolumeSpec) (*storagev1alpha1.ReplicatedVolume, error) {
	rv := &storagev1alpha1.ReplicatedVolume{
		ObjectMeta: metav1.ObjectMeta{Name: id, Annotations: map[string]string{AnnotationCSIName: csiName}},
		Spec:       spec,
	}
	err := c.client.Create(ctx, rv)
	switch {
	case apierrors.IsAlreadyExists(err):
		existing, gerr := c.getVolume(ctx, id)
		if gerr != nil {
			return nil, gerr
		}
		if existing == nil {
			return nil, status.Errorf(codes.Aborted, "CreateVolume %s: volume %s was created and deleted concurrently; retry", csiName, id)
		}
		return existing, nil
	case apierrors.IsInvalid(err):
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: the API refused volume %s: %v", csiName, id, err)
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "CreateVolume %s: create ReplicatedVolume %s: %v", csiName, id, err)
	}
	return rv, nil
}

// incompatibility says how an existing volume differs from the request
// ("" when the request is a retry of the one that created it).
func incompatibility(rv *storagev1alpha1.ReplicatedVolume, csiName string, want storagev1alpha1.ReplicatedVolumeSpec, r *csi.CapacityRange) string {
	var diffs []string
	if got := rv.Annotations[AnnotationCSIName]; got != csiName {
		diffs = append(diffs, fmt.Sprintf("it was created for CSI name %q", got))
	}
	if rv.Spec.AccessMode != want.AccessMode {
		diffs = append(diffs, fmt.Sprintf("access mode %s, requested %s", rv.Spec.AccessMode, want.AccessMode))
	}
	if rv.Spec.Replicas != want.Replicas {
		diffs = append(diffs, fmt.Sprintf("%s=%d, requested %d", ParamReplicas, rv.Spec.Replicas, want.Replicas))
	}
	if rv.Spec.BackingStorageClassName != want.BackingStorageClassName {
		diffs = append(diffs, fmt.Sprintf("%s=%s, requested %s", ParamBackingStorageClassName, rv.Spec.BackingStorageClassName, want.BackingStorageClassName))
	}
	if rv.Spec.Source != want.Source {
		diffs = append(diffs, fmt.Sprintf("source claim %s/%s, requested %s/%s",
			rv.Spec.Source.Namespace, rv.Spec.Source.Name, want.Source.Namespace, want.Source.Name))
	}
	have := rv.Spec.Capacity.Value()
	if have < r.GetRequiredBytes() || (r.GetLimitBytes() > 0 && have > r.GetLimitBytes()) {
		diffs = append(diffs, fmt.Sprintf("capacity %d bytes, outside the requested range [%d, %d]",
			have, r.GetRequiredBytes(), r.GetLimitBytes()))
	}
	return strings.Join(diffs, "; ")
}
