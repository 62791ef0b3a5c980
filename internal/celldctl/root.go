package celldctl

// The root command and the connection every subcommand shares. Connection
// flags come from cli-runtime's ConfigFlags, so kubeconfig loading,
// contexts, impersonation and timeouts behave exactly as in kubectl.

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/apischeme"
)

// displayName is how users call the plugin; the binary is kubectl-celld.
const displayName = "kubectl celld"

// rootOptions is what every subcommand shares: the connection flags and the
// streams it prints to.
type rootOptions struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// session is a connection to one cluster, resolved from the flags.
type session struct {
	c      client.WithWatch
	scheme *runtime.Scheme
	// namespace is -n, or the context's namespace when -n is absent.
	namespace string
	// explicitNamespace says -n was given (or the kubeconfig override
	// named one), which narrows commands whose default is cluster-wide.
	explicitNamespace bool
}

// NewCommand returns the kubectl-celld root command, printing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &rootOptions{config: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-celld",
		Short: "Show what the cluster reports about cellfleet fleets and replicated volumes",
		Long: `Show what the cluster reports about cellfleet fleets and replicated volumes.

It only reads (get, list, watch); it never changes a fleet or a volume.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: displayName},
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a subcommand there is nothing to show: say what exists.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q", args[0], displayName)
			}
			return cmd.Help()
		},
		Args: cobra.ArbitraryArgs,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	root.AddCommand(newFleetsCommand(o), newStatusCommand(o), newVolumesCommand(o), newVolumeCommand(o))
	registerConnectionCompletions(root, o)
	return root
}

// connect builds a client from the connection flags. The client talks to the
// API server directly (no cache), so every command sees the current state.
func (o *rootOptions) connect() (*session, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("client configuration from the kubeconfig and flags: %w", err)
	}
	cfg.UserAgent = "kubectl-celld"
	ns, explicit, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("namespace from kubeconfig: %w", err)
	}
	s, err := apischeme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", cfg.Host, err)
	}
	return &session{c: c, scheme: s, namespace: ns, explicitNamespace: explicit}, nil
}
