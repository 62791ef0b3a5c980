package chartcheck

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestChartLintsCleanWithStrictChecks(t *testing.T) {
	args := append([]string{"lint", "--strict", chartDir(), "--namespace", releaseNamespace, "--kube-version", kubeVersion}, imageValues...)
	out, errOut, err := runHelm(t, args...)
	if err != nil {
		t.Fatalf("helm lint --strict must pass:\n%s%s", out, errOut)
	}
}

// The chart installs its CRDs from crds/, which must be byte for byte the CRDs
// that `make manifests` generates, or a Helm install would run a schema the
// manager was not built against.
func TestChartShipsExactlyTheGeneratedCRDs(t *testing.T) {
	generated := yamlFiles(t, repoPath("config", "crd", "bases"))
	shipped := yamlFiles(t, filepath.Join(chartDir(), "crds"))
	if !slices.Equal(generated, shipped) {
		t.Fatalf("charts/cellfleet/crds must hold exactly the files of config/crd/bases (run make chart-sync):\n generated %v\n shipped   %v", generated, shipped)
	}
	for _, name := range generated {
		want := readFile(t, repoPath("config", "crd", "bases", name))
		got := readFile(t, filepath.Join(chartDir(), "crds", name))
		if !bytes.Equal(want, got) {
			t.Errorf("charts/cellfleet/crds/%s differs from config/crd/bases/%s: run make chart-sync", name, name)
		}
	}
}

// The role files the templates read are copies of the generated ones; the
// rendered rules are compared too (rbac_test.go), this names the fix.
func TestChartCarriesTheGeneratedRoleFiles(t *testing.T) {
	var want []string
	for _, f := range roleFiles {
		if f.copyName == "" {
			continue // the chart writes this role itself; rbac_test.go compares its rules
		}
		want = append(want, f.copyName)
		if !bytes.Equal(readFile(t, repoPath(f.source...)), readFile(t, filepath.Join(chartDir(), "files", "rbac", f.copyName))) {
			t.Errorf("charts/cellfleet/files/rbac/%s differs from %s: run make chart-sync", f.copyName, filepath.Join(f.source...))
		}
	}
	slices.Sort(want)
	if got := yamlFiles(t, filepath.Join(chartDir(), "files", "rbac")); !slices.Equal(got, want) {
		t.Errorf("charts/cellfleet/files/rbac must hold exactly %v (make chart-sync); got %v", want, got)
	}
}

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	names := make([]string, 0, len(matches))
	for _, m := range matches {
		names = append(names, filepath.Base(m))
	}
	slices.Sort(names)
	return names
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return data
}
