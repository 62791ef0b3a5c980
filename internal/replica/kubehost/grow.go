package kubehost

// Growth: the volume controller raises a VolumeReplica's spec.capacity once
// the backing claims hold it (internal/controller/volume/growth.go). The
// host whose worker coordinates commits it through Raft; the others learn
// it from the log. Only the coordinator proposes, so R hosts seeing the
// same spec make one change, and a follower never needs to reach anyone.
// Every host reports the capacity its worker serves in status.capacity.

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica"
)

// wantedCapacity is the capacity the spec asks for, 0 when it names none.
func wantedCapacity(vr *storagev1alpha1.VolumeReplica) uint64 {
	if vr.Spec.Capacity == nil || vr.Spec.Capacity.Sign() <= 0 {
		return 0
	}
	return uint64(vr.Spec.Capacity.Value())
}

// grow commits the spec's capacity when this host's worker coordinates and
// serves less. A shrink (the spec below the replicated capacity: only a
// worker configured larger than its spec could get there) is refused by
// the worker and reported, never applied.
func (a *Agent) grow(vr *storagev1alpha1.VolumeReplica, wk *replica.Worker) error {
	want := wantedCapacity(vr)
	if wk == nil || want == 0 || wk.Capacity() >= want {
		return nil
	}
	if _, st, ok := a.host.Worker(key(vr)); !ok || role(st) != storagev1alpha1.RoleCoordinator {
		return nil // a follower learns it from the log
	}
	got, err := wk.GrowCapacity(want)
	switch {
	case errors.Is(err, replica.ErrNotCoordinator):
		return nil // the role moved since; the new coordinator's host does it
	case err != nil:
		return fmt.Errorf("grow replica %s's volume to %d bytes: %w", vr.Name, want, err)
	}
	a.log.Info("volume capacity committed", "replica", vr.Name, "volume", vr.Spec.VolumeName, "capacity", got)
	return nil
}

// servedCapacity is the status' report of what the worker serves.
func servedCapacity(wk *replica.Worker) *resource.Quantity {
	if wk == nil {
		return nil
	}
	c := wk.Capacity()
	if c == 0 || c > 1<<62 {
		return nil
	}
	return resource.NewQuantity(int64(c), resource.BinarySI)
}
