package celldctl

// The report commands (status FLEET, volume NAME) share one shape: gather
// every object the report is about at one moment, print it for people or as
// a kind: List of those objects, and with --watch gather and print it again
// whenever one of the watched objects changes.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// report is what one report command read.
type report interface {
	// objects are the objects the report shows, for -o json|yaml|name.
	objects() []client.Object
	// print writes the report for people.
	print(w io.Writer, opts printers.PrintOptions, now time.Time) error
}

// reportOf says how to read the report of one named object and what to
// watch to know it changed.
type reportOf struct {
	gather func(ctx context.Context, s *session, name string) (report, error)
	watch  func(s *session, name string) []watchTarget
	// concerns says whether a watched object that changed belongs to the
	// report, when the watch cannot select only those (nil: all do).
	concerns func(name string, obj runtime.Object) bool
}

// newReportCommand makes cmd (its Use, Short and Example set) the report
// command of one object of kind, named by its only argument.
func newReportCommand(o *rootOptions, cmd *cobra.Command, kind objectKind, r reportOf) *cobra.Command {
	cmd.Args = exactlyOne(cmd.Name(), kind)
	cmd.ValidArgsFunction = completeNames(o, kind)
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := o.connect()
		if err != nil {
			return err
		}
		name := args[0]
		gather := func(ctx context.Context) (report, error) { return r.gather(ctx, s, name) }
		var targets []watchTarget
		if out.watch {
			targets = r.watch(s, name)
		}
		concerns := func(obj runtime.Object) bool { return r.concerns == nil || r.concerns(name, obj) }
		return runReport(cmd.Context(), s, o, out, gather, targets, concerns)
	}
	return cmd
}

func runReport(ctx context.Context, s *session, o *rootOptions, out *outputOptions,
	gather func(context.Context) (report, error), targets []watchTarget, concerns func(runtime.Object) bool) error {
	objPrinter, err := out.objectPrinter()
	if err != nil {
		return err
	}
	var f *follower
	if out.watch {
		if f, err = follow(ctx, s.c, targets...); err != nil {
			return err
		}
	}
	show := func() error {
		r, err := gather(ctx)
		if err != nil {
			return err
		}
		if objPrinter != nil {
			list, err := asList(s.scheme, r.objects())
			if err != nil {
				return err
			}
			return objPrinter.PrintObj(list, o.streams.Out)
		}
		return r.print(o.streams.Out, out.tableOptions(false), time.Now())
	}
	if err := show(); err != nil {
		return err
	}
	if f == nil {
		return nil
	}
	err = f.run(ctx, func(_ watch.EventType, changed runtime.Object) error {
		if !concerns(changed) {
			return nil
		}
		fmt.Fprintln(o.streams.Out)
		return show()
	})
	// The object went away while watched: that is the last change to show,
	// not a failure of the command.
	var gone *notFoundError
	if errors.As(err, &gone) {
		fmt.Fprintln(o.streams.ErrOut, gone.deleted())
		return nil
	}
	return err
}
