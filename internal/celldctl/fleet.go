package celldctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

// claimPrefix is the StatefulSet volume claim template's name: member n's
// disk is data-<fleet>-<n>.
const claimPrefix = "data"

// FleetStatus writes one fleet's status: replica counts, conditions and, per
// member Pod, its node, readiness and disk.
func FleetStatus(ctx context.Context, c client.Reader, namespace, name string, now time.Time, w io.Writer) error {
	var fleet celldv1alpha1.CelldFleet
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fleet); err != nil {
		return fmt.Errorf("get CelldFleet %s/%s: %w", namespace, name, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingLabels{celldv1alpha1.LabelFleet: name}); err != nil {
		return fmt.Errorf("list member Pods of %s/%s: %w", namespace, name, err)
	}
	claims := map[string]corev1.PersistentVolumeClaim{}
	if fleet.Spec.Profile == celldv1alpha1.ProfilePersistentFleet {
		var list corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &list, client.InNamespace(namespace),
			client.MatchingLabels{celldv1alpha1.LabelFleet: name}); err != nil {
			return fmt.Errorf("list claims of %s/%s: %w", namespace, name, err)
		}
		for _, pvc := range list.Items {
			claims[pvc.Name] = pvc
		}
	}

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	st := fleet.Status
	fmt.Fprintf(tw, "Fleet:\t%s/%s\n", namespace, name)
	fmt.Fprintf(tw, "Profile:\t%s\n", fleet.Spec.Profile)
	fmt.Fprintf(tw, "Image:\t%s\n", fleet.Spec.RuntimeImage)
	fmt.Fprintf(tw, "Replicas:\tdesired %d, applied %d, ready %d, updated %d\n",
		st.DesiredReplicas, st.AppliedReplicas, st.ReadyReplicas, st.UpdatedReplicas)
	if st.BlockedSince != nil {
		fmt.Fprintf(tw, "Blocked since:\t%s (%s)\n", st.BlockedSince.UTC().Format(time.RFC3339), age(st.BlockedSince.Time, now))
	}
	if len(st.UnschedulableMembers) > 0 {
		fmt.Fprintf(tw, "Unschedulable:\t%s\n", strings.Join(st.UnschedulableMembers, ", "))
	}
	if st.ObservedGeneration != fleet.Generation {
		fmt.Fprintf(tw, "Observed:\tgeneration %d of %d (the operator has not caught up)\n", st.ObservedGeneration, fleet.Generation)
	}
	writeConditions(tw, st.Conditions, now)

	fmt.Fprintln(tw, "\nMEMBER\tNODE\tPHASE\tREADY\tDISK\tDISK PHASE\tAGE")
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		disk, diskPhase := "-", "-"
		if fleet.Spec.Profile == celldv1alpha1.ProfilePersistentFleet {
			disk = claimPrefix + "-" + p.Name
			if pvc, ok := claims[disk]; ok {
				diskPhase = string(pvc.Status.Phase)
			} else {
				diskPhase = "missing"
			}
		}
		node := p.Spec.NodeName
		if node == "" {
			node = "<unscheduled>"
		}
		phase := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			phase = "Terminating"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", p.Name, node, phase, podReady(&p), disk, diskPhase,
			age(p.CreationTimestamp.Time, now))
	}
	if len(pods.Items) == 0 {
		fmt.Fprintln(tw, "(no member Pods)")
	}
	return tw.Flush()
}

func writeConditions(tw *tabwriter.Writer, conds []metav1.Condition, now time.Time) {
	fmt.Fprintln(tw, "\nCONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(c.LastTransitionTime.Time, now), c.Message)
	}
	if len(conds) == 0 {
		fmt.Fprintln(tw, "(none reported yet)")
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// age renders a duration the way kubectl does: the two largest units.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
