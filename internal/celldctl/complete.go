package celldctl

// Shell completion: cobra's completion command writes the script
// (kubectl celld completion bash|zsh|fish|powershell), and these functions
// complete fleet, volume, namespace and context names from the cluster the
// flags typed so far point at. kubectl completes a plugin's arguments
// through an executable named kubectl_complete-celld (docs/install.md).

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	celldv1alpha1 "github.com/cellfleet/cellfleet/api/celld/v1alpha1"
	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
)

// exactlyOne accepts one positional argument, the name of an object of kind.
func exactlyOne(command string, kind objectKind) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%s takes exactly one %s name, got %d", command, kind, len(args))
		}
		return nil
	}
}

// completeNames completes the single argument of status or volume with the
// names of the fleets in the namespace, or of the volumes, each with a short
// description.
func completeNames(o *rootOptions, kind objectKind) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := o.connect()
		if err != nil {
			cobra.CompErrorln(err.Error())
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		switch kind {
		case kindFleet:
			var list celldv1alpha1.CelldFleetList
			if err = s.c.List(cmd.Context(), &list, client.InNamespace(s.namespace)); err == nil {
				for _, f := range list.Items {
					names = append(names, cobra.CompletionWithDesc(f.Name, fmt.Sprintf("%s, %d/%d ready",
						f.Spec.Profile, f.Status.ReadyReplicas, f.Status.DesiredReplicas)))
				}
			}
		case kindVolume:
			var list storagev1alpha1.ReplicatedVolumeList
			if err = s.c.List(cmd.Context(), &list); err == nil {
				for _, v := range list.Items {
					names = append(names, cobra.CompletionWithDesc(v.Name, fmt.Sprintf("%s/%s, %s",
						v.Spec.Source.Namespace, v.Spec.Source.Name, robustness(&v))))
				}
			}
		}
		if err != nil {
			cobra.CompErrorln(fmt.Sprintf("list %ss: %v", kind, err))
			return nil, cobra.ShellCompDirectiveError
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// registerConnectionCompletions completes -n with the cluster's namespaces
// and --context with the kubeconfig's contexts, as kubectl does.
func registerConnectionCompletions(root *cobra.Command, o *rootOptions) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		s, err := o.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var list corev1.NamespaceList
		if err := s.c.List(cmd.Context(), &list); err != nil {
			cobra.CompErrorln(fmt.Sprintf("list namespaces: %v", err))
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		raw, err := o.config.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for name := range raw.Contexts {
			names = append(names, name)
		}
		return withPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}

// withPrefix keeps the completions that start with what was typed, sorted.
func withPrefix(all []cobra.Completion, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range all {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}
