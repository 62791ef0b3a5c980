package fleet

// Storage identity (docs/fleet-operator.md, "Disks"): before creating or
// growing the StatefulSet the operator refuses to proceed if a claim at a
// member's name does not carry the fleet's UID label. A disk from another
// fleet, or one made by hand, is never adopted.

import (
	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// identityConflict checks the claims at the names of members [0, n).
func identityConflict(f *celldv1alpha1.CelldFleet, obs *observation, n int32) *finding {
	if !persistent(f) {
		return nil
	}
	for i := range n {
		c, ok := obs.claims[claimName(f, i)]
		if !ok || c.Labels[celldv1alpha1.LabelFleetUID] == string(f.UID) {
			continue
		}
		return blocked(celldv1alpha1.ReasonStorageIdentityConflict,
			"claim %s at member %s's name does not carry this fleet's UID label %s=%s; it belongs to another fleet or was made by hand, and is never adopted: move it away or delete it",
			c.Name, memberName(f, i), celldv1alpha1.LabelFleetUID, f.UID)
	}
	return nil
}
