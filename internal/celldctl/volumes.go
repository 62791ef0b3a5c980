package celldctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// Volumes writes one line per ReplicatedVolume: its robustness, coordinator
// and how many of its replicas are ready, lagging or lost.
func Volumes(ctx context.Context, c client.Reader, now time.Time, w io.Writer) error {
	var list storagev1alpha1.ReplicatedVolumeList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("list ReplicatedVolumes: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tCLAIM\tACCESS\tCAPACITY\tREPLICAS\tREADY\tLAGGING\tLOST\tROBUSTNESS\tCOORDINATOR\tAGE")
	for _, v := range list.Items {
		var ready, lagging, lost int
		for _, r := range v.Status.Replicas {
			if r.Ready {
				ready++
			}
			if r.Lag > 0 {
				lagging++
			}
			if r.StateLost {
				lost++
			}
		}
		robustness := string(v.Status.Robustness)
		if robustness == "" {
			robustness = "<unknown>"
		}
		coordinator := v.Status.Coordinator
		if coordinator == "" {
			coordinator = "-"
		}
		claim := "-"
		if v.Spec.Source.Name != "" {
			claim = v.Spec.Source.Namespace + "/" + v.Spec.Source.Name
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", v.Name, claim, v.Spec.AccessMode,
			v.Spec.Capacity.String(), v.Spec.Replicas, ready, lagging, lost, robustness, coordinator,
			age(v.CreationTimestamp.Time, now))
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(tw, "(no replicated volumes)")
	}
	return tw.Flush()
}
