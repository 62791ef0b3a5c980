package celldctl

// Output: the human forms (the default and -o wide) are tables printed by
// cli-runtime's table printer, the same printer kubectl get uses; every other
// -o format is cli-runtime's PrintFlags printer applied to the objects
// themselves, as a kind: List the way kubectl prints several objects.

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// formatWide is the human form with the extra columns.
const formatWide = "wide"

// outputOptions are a command's -o, --no-headers and --watch flags.
type outputOptions struct {
	print     *genericclioptions.PrintFlags
	noHeaders bool
	watch     bool
}

func addOutputFlags(cmd *cobra.Command) *outputOptions {
	o := &outputOptions{print: genericclioptions.NewPrintFlags("")}
	o.print.AddFlags(cmd)
	formats := append([]string{formatWide}, o.print.AllowedFormats()...)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s).", strings.Join(formats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return withPrefix(formats, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "When using the default or wide output format, don't print headers.")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false,
		"After printing, watch for changes and print again until interrupted, --request-timeout passes or the server ends the watch.")
	return o
}

// human says the output is a table for people (the default or -o wide).
func (o *outputOptions) human() bool {
	f := *o.print.OutputFormat
	return f == "" || f == formatWide
}

// tableOptions are the table printer's options for this command line.
func (o *outputOptions) tableOptions(withNamespace bool) printers.PrintOptions {
	return printers.PrintOptions{Wide: *o.print.OutputFormat == formatWide, NoHeaders: o.noHeaders, WithNamespace: withNamespace}
}

// objectPrinter is the printer of a machine-readable -o format. Asked
// before anything is fetched, so a typo in -o fails at once.
func (o *outputOptions) objectPrinter() (printers.ResourcePrinter, error) {
	if o.human() {
		return nil, nil
	}
	p, err := o.print.ToPrinter()
	if err != nil {
		return nil, fmt.Errorf("-o %s: %w", *o.print.OutputFormat, err)
	}
	return p, nil
}

// typed returns obj as it would come from kubectl get: apiVersion and kind
// set, managed fields left out (kubectl hides them too).
func typed(s *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return nil, fmt.Errorf("kind of %T: %w", obj, err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s %q: %w", gvk.Kind, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	u.SetManagedFields(nil)
	return u, nil
}

// asList wraps objects in a kind: List, as kubectl prints several objects.
func asList(s *runtime.Scheme, objs []client.Object) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	list.SetAPIVersion("v1")
	list.SetKind("List")
	for _, obj := range objs {
		u, err := typed(s, obj)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *u)
	}
	return list, nil
}

// column is one column of a table; wide columns show only with -o wide.
type column struct {
	name string
	wide bool
}

func newTable(cols ...column) *metav1.Table {
	t := &metav1.Table{}
	for _, c := range cols {
		def := metav1.TableColumnDefinition{Name: c.name, Type: "string"}
		if c.wide {
			def.Priority = 1
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, def)
	}
	return t
}

// addRow appends a row about obj (nil when the row is about no single
// object); the printer reads obj's namespace for -A.
func addRow(t *metav1.Table, obj runtime.Object, cells ...any) {
	t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}})
}

// printSection prints one titled table of a report, indented under its
// title, or "<none>" when it has no rows.
func printSection(w io.Writer, title string, t *metav1.Table, opts printers.PrintOptions) error {
	if _, err := fmt.Fprintf(w, "\n%s:\n", title); err != nil {
		return err
	}
	if len(t.Rows) == 0 {
		_, err := fmt.Fprintln(w, "  <none>")
		return err
	}
	opts.WithNamespace = false
	return printers.NewTablePrinter(opts).PrintObj(t, &indenter{w: w, atLineStart: true})
}

// indenter indents every line it writes by two spaces.
type indenter struct {
	w           io.Writer
	atLineStart bool
}

func (i *indenter) Write(p []byte) (int, error) {
	var b []byte
	for _, c := range p {
		if i.atLineStart {
			b = append(b, ' ', ' ')
		}
		b = append(b, c)
		i.atLineStart = c == '\n'
	}
	if _, err := i.w.Write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// field is one "Name: value" line of a report's header.
type field struct{ name, value string }

// printFields prints a report's header lines, values aligned.
func printFields(w io.Writer, fields []field) error {
	width := 0
	for _, f := range fields {
		width = max(width, len(f.name))
	}
	for _, f := range fields {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width+1, f.name+":", sanitize(f.value)); err != nil {
			return err
		}
	}
	return nil
}

// sanitize keeps a value written by someone else (a message, an
// annotation) from moving the terminal's cursor or faking lines.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// orNone renders an empty value the way kubectl does.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
