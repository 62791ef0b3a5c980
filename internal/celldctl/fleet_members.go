package celldctl

// The self-healing columns of status FLEET's Members section
// (docs/fleet-operator.md, Self-healing): for each member, the template
// revision its Pod runs, since when it has been down and when the operator
// will replace it (both from the operator's record in status.members),
// whether its disk has served (the served-disk mark,
// docs/decisions/0004-served-disk-mark.md) and the zone it runs in.

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// zoneLabel is the well-known label of a node's zone.
const zoneLabel = "topology.kubernetes.io/zone"

// claimPodSkew is the operator's bound on how much older than its Pod a claim
// created for that Pod can look (timestamps have whole seconds).
const claimPodSkew = time.Second

// gatherZones reads the zone of each member's node. A node the user may not
// read, or that is gone, leaves its members' zone unknown: the report is
// still worth printing.
func gatherZones(ctx context.Context, c client.Reader, members []corev1.Pod) (map[string]string, error) {
	zones := map[string]string{}
	for i := range members {
		node := members[i].Spec.NodeName
		if node == "" {
			continue
		}
		if _, seen := zones[node]; seen {
			continue
		}
		var n corev1.Node
		switch err := c.Get(ctx, client.ObjectKey{Name: node}, &n); {
		case err == nil:
			zones[node] = n.Labels[zoneLabel]
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
			zones[node] = ""
		default:
			return nil, fmt.Errorf("get node %q: %w", node, err)
		}
	}
	return zones, nil
}

// memberRecord is the operator's record of the named member, if any.
func (r *fleetReport) memberRecord(name string) (celldv1alpha1.MemberStatus, bool) {
	for _, m := range r.fleet.Status.Members {
		if m.Name == name {
			return m, true
		}
	}
	return celldv1alpha1.MemberStatus{}, false
}

// memberHealth is what self-healing knows of one member, as printed.
type memberHealth struct{ revision, downSince, due, served, zone string }

// healthOf reads a member's self-healing cells.
func (r *fleetReport) healthOf(p *corev1.Pod, claim *corev1.PersistentVolumeClaim, now time.Time) memberHealth {
	downSince, due := "-", "-"
	if rec, ok := r.memberRecord(p.Name); ok && rec.DownSince != nil {
		downSince = fmt.Sprintf("%s (%s)", rec.DownSince.UTC().Format(time.RFC3339), age(rec.DownSince.Time, now))
		due = "not planned (see Healing)"
		if rec.ReplacementDue != nil {
			due = rec.ReplacementDue.UTC().Format(time.RFC3339)
			if rec.ReplacementDue.After(now) {
				due += " (in " + age(now, rec.ReplacementDue.Time) + ")"
			} else {
				due += " (overdue)"
			}
		}
	}
	zone := "-"
	if node := p.Spec.NodeName; node != "" {
		zone = r.zones[node]
		if zone == "" {
			zone = "<unknown>"
		}
	}
	return memberHealth{revision: orNone(p.Labels[appsv1.ControllerRevisionHashLabelKey]), downSince: downSince, due: due,
		served: diskServed(p, claim), zone: zone}
}

// diskServed says whether the member's disk has held its state, as the
// operator judges it: a disk older than the member's Pod has served an
// earlier Pod; a disk created for the current Pod has served once the
// operator saw that Pod Ready on it and marked it.
func diskServed(p *corev1.Pod, claim *corev1.PersistentVolumeClaim) string {
	switch {
	case claim == nil:
		return "-"
	case p.Annotations[celldv1alpha1.AnnotationServedOn] == string(claim.UID):
		return "yes (marked)"
	case claim.CreationTimestamp.Add(claimPodSkew).Before(p.CreationTimestamp.Time):
		return "yes (older than its Pod)"
	}
	return "no (created for this Pod, never Ready on it)"
}
