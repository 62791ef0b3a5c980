// Command kubectl-celld is a kubectl plugin that shows what the cluster
// reports about cellfleet objects:
//
//	kubectl celld status FLEET [-n NAMESPACE]
//	kubectl celld volumes
//
// It only reads; it never changes a fleet or a volume.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/internal/apischeme"
	"github.com/cellfleet/cellfleet/internal/celldctl"
)

const usage = `usage:
  kubectl celld status FLEET [-n NAMESPACE] [--kubeconfig FILE] [--context NAME]
  kubectl celld volumes [--kubeconfig FILE] [--context NAME]
`

// errUsage marks a command line that cannot be run; main prints the usage.
var errUsage = errors.New("bad usage")

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if errors.Is(err, errUsage) {
		fmt.Fprintf(os.Stderr, "kubectl-celld: %v\n%s", err, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubectl-celld: %v\n", err)
		os.Exit(1)
	}
}

type globalFlags struct {
	kubeconfig, context, namespace string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no command", errUsage)
	}
	cmd, rest := args[0], args[1:]
	var g globalFlags
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&g.context, "context", "", "kubeconfig context to use")
	fs.StringVar(&g.namespace, "namespace", "", "namespace of the fleet (default: the context's)")
	fs.StringVar(&g.namespace, "n", "", "shorthand for --namespace")
	positional, err := parseInterspersed(fs, rest)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	switch cmd {
	case "status":
		if len(positional) != 1 {
			return fmt.Errorf("%w: status takes exactly one fleet name, got %d", errUsage, len(positional))
		}
		c, ns, err := connect(g)
		if err != nil {
			return err
		}
		return celldctl.FleetStatus(ctx, c, ns, positional[0], time.Now(), out)
	case "volumes":
		if len(positional) != 0 {
			return fmt.Errorf("%w: volumes takes no arguments", errUsage)
		}
		c, _, err := connect(g)
		if err != nil {
			return err
		}
		return celldctl.Volumes(ctx, c, time.Now(), out)
	default:
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// parseInterspersed lets flags follow the positional arguments, as kubectl
// users type them (`status web -n prod`).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func connect(g globalFlags) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if g.kubeconfig != "" {
		rules.ExplicitPath = g.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: g.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("load kubeconfig: %w", err)
	}
	ns := g.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("namespace from kubeconfig: %w", err)
		}
	}
	s, err := apischeme.New()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, "", fmt.Errorf("connect to the API server: %w", err)
	}
	return c, ns, nil
}
