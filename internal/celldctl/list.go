package celldctl

// The list commands (fleets, volumes) share one shape: list, print a table
// or the objects, and with --watch print one more row (or object) for every
// change, as kubectl get --watch does.

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// listing is what one list command shows.
type listing struct {
	// plural names the objects in messages ("fleets").
	plural string
	list   client.ObjectList
	opts   []client.ListOption
	// keep narrows the list further than the API can (nil keeps all).
	keep    func(client.Object) bool
	columns []column
	row     func(t *metav1.Table, obj client.Object, now time.Time)
	// withNamespace adds the NAMESPACE column (-A).
	withNamespace bool
	// scope says where nothing was found ("in namespace \"x\"").
	scope string
}

func runList(ctx context.Context, s *session, streams genericiooptions.IOStreams, out *outputOptions, l listing) error {
	objPrinter, err := out.objectPrinter()
	if err != nil {
		return err
	}
	var f *follower
	if out.watch {
		if f, err = follow(ctx, s.c, watchTarget{list: l.list, opts: l.opts}); err != nil {
			return err
		}
	}
	if err := s.c.List(ctx, l.list, l.opts...); err != nil {
		return fmt.Errorf("list %s: %w", l.plural, err)
	}
	items, err := listItems(l.list, l.keep)
	if err != nil {
		return err
	}
	table := printers.NewTablePrinter(out.tableOptions(l.withNamespace))
	// One tabwriter for the whole command, remembering column widths, so the
	// rows a --watch prints line up with the first table.
	tw := printers.GetNewTabWriter(streams.Out)
	print := func(objs []client.Object) error {
		if objPrinter != nil {
			list, err := asList(s.scheme, objs)
			if err != nil {
				return err
			}
			return objPrinter.PrintObj(list, streams.Out)
		}
		t := newTable(l.columns...)
		now := time.Now()
		for _, o := range objs {
			l.row(t, o, now)
		}
		if err := table.PrintObj(t, tw); err != nil {
			return err
		}
		return tw.Flush()
	}
	if len(items) == 0 && objPrinter == nil {
		fmt.Fprintf(streams.ErrOut, "No %s found%s.\n", l.plural, l.scope)
	} else if err := print(items); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	return f.run(ctx, func(_ watch.EventType, changed runtime.Object) error {
		o, ok := changed.(client.Object)
		if !ok || (l.keep != nil && !l.keep(o)) {
			return nil
		}
		if objPrinter != nil {
			u, err := typed(s.scheme, o)
			if err != nil {
				return err
			}
			return objPrinter.PrintObj(u, streams.Out)
		}
		return print([]client.Object{o})
	})
}

// listItems returns the kept items of a list, sorted by namespace and name.
func listItems(list client.ObjectList, keep func(client.Object) bool) ([]client.Object, error) {
	raw, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("read %T: %w", list, err)
	}
	var items []client.Object
	for _, r := range raw {
		o, ok := r.(client.Object)
		if ok && (keep == nil || keep(o)) {
			items = append(items, o)
		}
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetName() < items[j].GetName()
	})
	return items, nil
}
