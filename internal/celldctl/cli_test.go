package celldctl_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestMissingObjectsAreNamedWithTheirNamespace(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"status", "nope", "-n", "prod"}, `celldfleet "nope" not found in namespace "prod"`},
		{[]string{"status", "nope"}, `celldfleet "nope" not found in namespace "default"`},
		{[]string{"status", "nope", "--context", "elsewhere"}, `celldfleet "nope" not found in namespace "` + contextNamespace + `"`},
		{[]string{"volume", "nope"}, `replicatedvolume "nope" not found`},
	}
	for _, tc := range cases {
		_, _, err := plugin(ctx, t, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("kubectl celld %s: error %v, want exactly %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if !apierrors.IsNotFound(errors.Unwrap(err)) {
			t.Errorf("kubectl celld %s: error %v does not unwrap to the API server's NotFound", strings.Join(tc.args, " "), err)
		}
	}
}

func TestAsImpersonatesAndTheRefusalNamesTheObject(t *testing.T) {
	ns := namespace(t, "status-as")
	fleet := makeFleet(t, ns)
	_, _, err := plugin(context.Background(), t, "status", fleet.Name, "-n", ns, "--as", "nobody")
	want := `get celldfleet "sample-persistent" in namespace "` + ns + `": `
	if err == nil || !strings.HasPrefix(err.Error(), want) || !apierrors.IsForbidden(errors.Unwrap(err)) ||
		!strings.Contains(err.Error(), `User "nobody"`) {
		t.Fatalf("status --as nobody: %v, want a Forbidden for user nobody starting %q", err, want)
	}
}

func TestBadCommandLinesAreRefusedBeforeAnythingIsRead(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"scale"}, `unknown command "scale" for "kubectl celld"`},
		{[]string{"status"}, "status takes exactly one celldfleet name, got 0"},
		{[]string{"status", "a", "b"}, "status takes exactly one celldfleet name, got 2"},
		{[]string{"volume"}, "volume takes exactly one replicatedvolume name, got 0"},
		{[]string{"volumes", "extra"}, `unknown command "extra" for "kubectl celld volumes"`},
		{[]string{"status", "web", "-A"}, "unknown shorthand flag: 'A' in -A"},
		{[]string{"status", "web", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"volumes", "-o", "table"}, `-o table: unable to match a printer suitable for the output format "table"`},
		{[]string{"fleets", "--request-timeout", "soon"}, "Invalid timeout value"},
	}
	for _, tc := range cases {
		_, _, err := plugin(context.Background(), t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kubectl celld %s: error %v, want one containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func TestCompletionScriptsAndNamesFromTheCluster(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "complete")
	fleet := makeFleet(t, ns)
	v := makeVolume(t, "vol-complete", ns)

	if out := mustPlugin(ctx, t, "completion", "bash"); !strings.Contains(out, "__start_kubectl-celld") {
		t.Errorf("completion bash is not a bash completion script for kubectl-celld:\n%.300s", out)
	}
	if out := mustPlugin(ctx, t, "completion", "zsh"); !strings.HasPrefix(out, "#compdef kubectl-celld") {
		t.Errorf("completion zsh is not a zsh completion script for kubectl-celld:\n%.300s", out)
	}
	cases := []struct {
		args []string
		want []string
		not  string
	}{
		{[]string{"__complete", "status", "-n", ns, ""}, []string{fleet.Name + "\tPersistentFleet, 1/3 ready"}, ""},
		{[]string{"__complete", "status", "-n", ns, "zzz"}, nil, fleet.Name},
		{[]string{"__complete", "status", "-n", ns, fleet.Name, ""}, nil, fleet.Name},
		{[]string{"__complete", "volume", "vol-comp"}, []string{v.Name + "\t" + ns + "/db, Degraded"}, "vol-list"},
		{[]string{"__complete", "fleets", "-n", "compl"}, []string{ns}, ""},
		{[]string{"__complete", "fleets", "--context", "else"}, []string{"elsewhere"}, "envtest"},
		{[]string{"__complete", "volumes", "-o", "w"}, []string{"wide"}, "json"},
	}
	for _, tc := range cases {
		out := mustPlugin(ctx, t, tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("kubectl celld %s offers:\n%s\nwant %q", strings.Join(tc.args, " "), out, w)
			}
		}
		if tc.not != "" && strings.Contains(out, tc.not) {
			t.Errorf("kubectl celld %s offers %q:\n%s", strings.Join(tc.args, " "), tc.not, out)
		}
	}
}
