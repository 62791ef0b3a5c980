package celldctl

// kubectl celld fleets: one line per CelldFleet, in the current namespace
// or, with -A, in all of them.

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
)

func newFleetsCommand(o *rootOptions) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "fleets",
		Short: "List CelldFleets: replica counts, readiness and what blocks them",
		Example: `  kubectl celld fleets -n prod
  kubectl celld fleets -A -o wide
  kubectl celld fleets --watch`,
		Args: cobra.NoArgs,
	}
	out := addOutputFlags(cmd)
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the fleets of every namespace.")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := o.connect()
		if err != nil {
			return err
		}
		l := listing{plural: "fleets", list: &celldv1alpha1.CelldFleetList{}, columns: fleetColumns,
			row: fleetRow, withNamespace: all}
		if !all {
			l.opts = []client.ListOption{client.InNamespace(s.namespace)}
			l.scope = fmt.Sprintf(" in namespace %q", s.namespace)
		}
		return runList(cmd.Context(), s, o.streams, out, l)
	}
	return cmd
}

var fleetColumns = []column{
	{name: "Name"}, {name: "Profile"}, {name: "Desired"}, {name: "Ready"}, {name: "Updated"},
	{name: "Applied", wide: true}, {name: "Status"}, {name: "Blocked"},
	{name: "Unschedulable", wide: true}, {name: "Image", wide: true}, {name: "Age"},
}

func fleetRow(t *metav1.Table, obj client.Object, now time.Time) {
	f := obj.(*celldv1alpha1.CelldFleet)
	st := f.Status
	addRow(t, f, f.Name, string(f.Spec.Profile), fmt.Sprint(st.DesiredReplicas), fmt.Sprint(st.ReadyReplicas),
		fmt.Sprint(st.UpdatedReplicas), fmt.Sprint(st.AppliedReplicas), readyStatus(f), blockedReason(f),
		orNone(strings.Join(st.UnschedulableMembers, ",")), f.Spec.RuntimeImage, age(f.CreationTimestamp.Time, now))
}

// readyStatus is the Ready condition's status, or Deleting while the fleet
// is being removed.
func readyStatus(f *celldv1alpha1.CelldFleet) string {
	if f.DeletionTimestamp != nil {
		return "Deleting"
	}
	if c := meta.FindStatusCondition(f.Status.Conditions, string(celldv1alpha1.ConditionReady)); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

// blockedReason is why the fleet is Blocked, or "-" when it is not.
func blockedReason(f *celldv1alpha1.CelldFleet) string {
	if meta.IsStatusConditionTrue(f.Status.Conditions, string(celldv1alpha1.ConditionBlocked)) {
		return meta.FindStatusCondition(f.Status.Conditions, string(celldv1alpha1.ConditionBlocked)).Reason
	}
	return "-"
}
