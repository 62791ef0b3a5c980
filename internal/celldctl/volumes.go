package celldctl

// kubectl celld volumes: one line per ReplicatedVolume with its robustness,
// coordinator and how many of its replicas are ready, lagging or lost.
//
// ReplicatedVolumes are cluster-scoped, so the list is cluster-wide unless
// -n is given: then it shows the volumes whose source claim lives in that
// namespace, which is how an application team finds its own.

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

func newVolumesCommand(o *rootOptions) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "volumes",
		Short: "List ReplicatedVolumes: robustness, coordinator and replica health",
		Long: `List ReplicatedVolumes: robustness, coordinator and replica health.

Volumes are cluster-scoped: all are listed unless -n names a namespace, which
lists the volumes whose source PersistentVolumeClaim is in it.`,
		Example: `  kubectl celld volumes
  kubectl celld volumes -n data -o wide
  kubectl celld volumes --watch`,
		Args: cobra.NoArgs,
	}
	out := addOutputFlags(cmd)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the volumes of every namespace's claims (the default unless -n is given).")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := o.connect()
		if err != nil {
			return err
		}
		l := listing{plural: "replicated volumes", list: &storagev1alpha1.ReplicatedVolumeList{},
			columns: volumeColumns, row: volumeRow}
		if s.explicitNamespace && !all {
			ns := s.namespace
			l.keep = func(obj client.Object) bool {
				return obj.(*storagev1alpha1.ReplicatedVolume).Spec.Source.Namespace == ns
			}
			l.scope = fmt.Sprintf(" for claims in namespace %q", ns)
		}
		return runList(cmd.Context(), s, o.streams, out, l)
	}
	return cmd
}

var volumeColumns = []column{
	{name: "Name"}, {name: "Claim"}, {name: "Access"}, {name: "Capacity"}, {name: "Replicas"}, {name: "Ready"},
	{name: "Lagging"}, {name: "Lost"}, {name: "Robustness"}, {name: "Coordinator"},
	{name: "Max Lag", wide: true}, {name: "Backing Class", wide: true}, {name: "Nodes", wide: true}, {name: "Age"},
}

func volumeRow(t *metav1.Table, obj client.Object, now time.Time) {
	v := obj.(*storagev1alpha1.ReplicatedVolume)
	h := replicaHealth(v.Status.Replicas)
	claim := "-"
	if v.Spec.Source.Name != "" {
		claim = v.Spec.Source.Namespace + "/" + v.Spec.Source.Name
	}
	addRow(t, v, v.Name, claim, string(v.Spec.AccessMode), v.Spec.Capacity.String(), fmt.Sprint(v.Spec.Replicas),
		fmt.Sprint(h.ready), fmt.Sprint(h.lagging), fmt.Sprint(h.lost), robustness(v), orDash(v.Status.Coordinator),
		fmt.Sprint(h.maxLag), v.Spec.BackingStorageClassName, orNone(strings.Join(h.nodes, ",")), age(v.CreationTimestamp.Time, now))
}

// health counts a volume's replicas as its status summarises them.
type health struct {
	ready, lagging, lost int
	maxLag               int64
	nodes                []string
}

func replicaHealth(replicas []storagev1alpha1.ReplicaSummary) health {
	var h health
	for _, r := range replicas {
		if r.Ready {
			h.ready++
		}
		if r.Lag > 0 {
			h.lagging++
		}
		if r.StateLost {
			h.lost++
		}
		h.maxLag = max(h.maxLag, r.Lag)
		if r.Node != "" {
			h.nodes = append(h.nodes, r.Node)
		}
	}
	return h
}

// robustness is the volume's reported robustness, or <unknown> before the
// volume controller first reported one.
func robustness(v *storagev1alpha1.ReplicatedVolume) string {
	if v.DeletionTimestamp != nil {
		return "Deleting"
	}
	if v.Status.Robustness == "" {
		return "<unknown>"
	}
	return string(v.Status.Robustness)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
