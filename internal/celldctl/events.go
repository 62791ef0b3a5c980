package celldctl

// The events of a report: those whose involved object is one of the
// report's objects, found by UID so an object recreated under the same name
// does not inherit its predecessor's events. The API server keeps
// events.k8s.io and core events in one store, so reading core events also
// shows what the operator's events.k8s.io recorder wrote.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// eventsAbout lists the events about objs, oldest first. Namespaced objects'
// events are read with one list per namespace; a cluster-scoped object's
// events live in whichever namespace its recorder chose, so they are found
// by a field selector on its UID across namespaces.
func eventsAbout(ctx context.Context, c client.Reader, objs ...client.Object) ([]corev1.Event, error) {
	uids := sets.New[types.UID]()
	namespaces := sets.New[string]()
	var clusterScoped []client.Object
	for _, o := range objs {
		uids.Insert(o.GetUID())
		if o.GetNamespace() == "" {
			clusterScoped = append(clusterScoped, o)
		} else {
			namespaces.Insert(o.GetNamespace())
		}
	}
	var out []corev1.Event
	for _, ns := range sets.List(namespaces) {
		var list corev1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("list events in namespace %q: %w", ns, err)
		}
		for _, e := range list.Items {
			if uids.Has(e.InvolvedObject.UID) {
				out = append(out, e)
			}
		}
	}
	for _, o := range clusterScoped {
		var list corev1.EventList
		if err := c.List(ctx, &list, client.MatchingFields{"involvedObject.uid": string(o.GetUID())}); err != nil {
			return nil, fmt.Errorf("list events about %q: %w", o.GetName(), err)
		}
		out = append(out, list.Items...)
	}
	sort.SliceStable(out, func(i, j int) bool { return lastSeen(&out[i]).Before(lastSeen(&out[j])) })
	return out, nil
}

// lastSeen is when an event last happened, whichever API wrote it.
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// eventCount is how many times an event happened.
func eventCount(e *corev1.Event) int32 {
	switch {
	case e.Series != nil:
		return e.Series.Count
	case e.Count > 0:
		return e.Count
	}
	return 1
}

func eventsTable(events []corev1.Event, now time.Time) *metav1.Table {
	t := newTable(column{name: "Last Seen"}, column{name: "Type"}, column{name: "Reason"}, column{name: "Object"},
		column{name: "Count", wide: true}, column{name: "Message"})
	for i := range events {
		e := &events[i]
		obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
		addRow(t, e, age(lastSeen(e), now), e.Type, e.Reason, obj, fmt.Sprint(eventCount(e)), sanitize(e.Message))
	}
	return t
}
