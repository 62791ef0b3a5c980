package e2e

// Helpers about members' disks and Pods that several scenarios assert on.

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// claimUIDs maps each of the fleet's claims to its UID.
func (s *scenario) claimUIDs() map[string]types.UID {
	s.t.Helper()
	var claims corev1.PersistentVolumeClaimList
	if err := env.Client.List(s.ctx, &claims, client.InNamespace(fleetNamespace)); err != nil {
		s.t.Fatalf("list claims: %v", err)
	}
	out := map[string]types.UID{}
	for _, c := range claims.Items {
		if strings.HasPrefix(c.Name, "data-"+s.name+"-") && c.DeletionTimestamp == nil {
			out[c.Name] = c.UID
		}
	}
	return out
}

// requireDisksRetained fails unless every claim of before still exists with
// the same UID (except those named in replaced, which must have a new UID).
func (s *scenario) requireDisksRetained(before map[string]types.UID, replaced ...string) {
	s.t.Helper()
	after := s.claimUIDs()
	for _, name := range slices.Sorted(maps.Keys(before)) {
		uid, ok := after[name]
		switch {
		case slices.Contains(replaced, name) && (!ok || uid == before[name]):
			s.t.Errorf("claim %s must have been replaced by a fresh disk (UID before %s, now %q)", name, before[name], uid)
		case !slices.Contains(replaced, name) && uid != before[name]:
			s.t.Errorf("member disk %s was not retained: UID %s before, %q now", name, before[name], uid)
		}
	}
}

// podUIDs maps each member Pod to its UID.
func (s *scenario) podUIDs() map[string]types.UID {
	s.t.Helper()
	pods, err := memberPods(s.ctx, s.name)
	if err != nil {
		s.t.Fatalf("list member Pods: %v", err)
	}
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// allReplaced reports whether no Pod of before still runs under the same UID.
func (s *scenario) allReplaced(before map[string]types.UID) bool {
	for name, uid := range s.podUIDs() {
		if before[name] == uid {
			return false
		}
	}
	return true
}

// anyReplaced reports whether at least one Pod of before has been replaced.
func (s *scenario) anyReplaced(before map[string]types.UID) bool {
	now := s.podUIDs()
	for name, uid := range before {
		if now[name] != uid {
			return true
		}
	}
	return false
}
