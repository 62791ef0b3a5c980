// Command kubectl-celld is the kubectl plugin `kubectl celld`: it shows what
// the cluster reports about cellfleet fleets and replicated volumes.
//
//	kubectl celld fleets [-A]
//	kubectl celld status FLEET [-n NAMESPACE]
//	kubectl celld volumes
//	kubectl celld volume NAME
//	kubectl celld completion bash|zsh
//
// Every command takes kubectl's connection flags and -o wide|json|yaml|name,
// and --watch. It only reads; it never changes a fleet or a volume. The
// commands live in internal/celldctl.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/cellfleet/cellfleet/internal/celldctl"
)

func main() {
	// Ctrl-C ends a --watch cleanly instead of killing it mid-line.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := celldctl.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		stop()
		os.Exit(1)
	}
}
