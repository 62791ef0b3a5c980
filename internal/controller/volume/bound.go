package volume

// A cluster-wide bound on replacements in progress
// (docs/decisions/0011-node-leases.md). Each replacement rebuilds a whole
// replica from its coordinator: disk and network on two nodes for as long as
// the volume is large. A node that dies with many replicas would otherwise
// start all their rebuilds together, and a misjudged liveness would turn
// into a storm that takes the healthy nodes' bandwidth too. Within one
// volume there is never more than one (replacement.go); across volumes at
// most --max-concurrent-replacements are in progress, and the others wait
// with Replacing=False AwaitingReplacementSlot. The count is taken from the
// API server (not the cache) under the allocation lock, as ports are, so two
// reconciles never both take the last slot.

import (
	"fmt"
	"sort"
	"strings"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Bounds of --max-concurrent-replacements.
const (
	DefaultMaxConcurrentReplacements = 4
	MinMaxConcurrentReplacements     = 1
)

// replacementsInProgress names the volumes with a replacement in progress
// (inProgress, per volume), from every VolumeReplica of the namespace.
func replacementsInProgress(all []storagev1alpha1.VolumeReplica) []string {
	byVolume := map[string]replicaSet{}
	for i := range all {
		vr := &all[i]
		byVolume[vr.Spec.VolumeName] = append(byVolume[vr.Spec.VolumeName], vr)
	}
	var out []string
	for volume, set := range byVolume {
		if _, repl := inProgress(set); repl != nil {
			out = append(out, volume)
		}
	}
	sort.Strings(out)
	return out
}

// slotTaken says why no replacement may start now ("" when one may).
func (r *Reconciler) slotTaken(all []storagev1alpha1.VolumeReplica) string {
	busy := replacementsInProgress(all)
	if len(busy) < r.maxReplacements {
		return ""
	}
	shown := busy
	if len(shown) > 5 {
		shown = append(shown[:5:5], "…")
	}
	return fmt.Sprintf("%d replacements are in progress across the cluster, --max-concurrent-replacements=%d (volumes %s)",
		len(busy), r.maxReplacements, strings.Join(shown, ", "))
}
