package importrules

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The package table of docs/architecture.md names every package under these
// top folders, and states for each the rule rules() enforces.
var tabled = []string{"api/", "cmd/", "internal/"}

func inTable(pkg string) bool {
	return slices.ContainsFunc(tabled, func(top string) bool { return strings.HasPrefix(pkg, top) })
}

// tableRules are the rules only the package table states: no doc comment of
// these packages says them.
func tableRules() []rule {
	const states = "docs/architecture.md"
	return []rule{
		{pkg: "api/celld/v1alpha1", never: []string{"internal/..."}, states: states},
		{pkg: "api/storage/v1alpha1", never: []string{"internal/..."}, states: states},
		{pkg: "internal/apischeme", never: []string{controller}, states: states},
		{pkg: "internal/controller/volume", never: []string{"internal/controller/fleet", "api/celld/..."}, states: states},
	}
}

func TestPackagesNeverImportWhatTheArchitectureTableForbids(t *testing.T) {
	g := listDeps(t, repoRoot(t), ".", "", false, "./...")
	for _, r := range tableRules() {
		bad := func(p string) bool {
			return slices.ContainsFunc(r.never, func(n string) bool { return matches(full(n), p) })
		}
		if chain := g.path(module+"/"+r.pkg, bad); chain != nil {
			t.Errorf("%s must never import %s (%s says so), but imports it: %s",
				r.pkg, strings.TrimPrefix(chain[len(chain)-1], module+"/"), r.states, short(chain))
		}
	}
}

// A row of the table: the package, the patterns it states the package must
// never import, and whether it calls the package test support.
type row struct {
	line        int
	pkg         string
	never       []string
	testSupport bool
}

var backticked = regexp.MustCompile("`([^`]+)`")

// packageTable parses the rows of the "## Packages" section of
// docs/architecture.md: | `package` | owns | never imports |.
func packageTable(t *testing.T, root string) []row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("read the architecture doc: %v", err)
	}
	var rows []row
	in := false
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Packages"
			continue
		case !in || !strings.HasPrefix(line, "| `"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Errorf("docs/architecture.md:%d: want 3 cells (package, owns, never imports), have %d: %s", i+1, len(cells), line)
			continue
		}
		name := backticked.FindAllStringSubmatch(cells[0], -1)
		if len(name) != 1 {
			t.Errorf("docs/architecture.md:%d: the first cell must name exactly one package: %s", i+1, cells[0])
			continue
		}
		r := row{line: i + 1, pkg: name[0][1], testSupport: strings.Contains(cells[2], "test support")}
		for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
			r.never = append(r.never, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no package table under \"## Packages\"")
	}
	return rows
}

// modulePackages lists the packages under the tabled folders, relative to
// the module.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	var patterns []string
	for _, top := range tabled {
		patterns = append(patterns, "./"+top+"...")
	}
	cmd := exec.Command("go", append([]string{"list"}, patterns...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(patterns, " "), err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, module+"/"))
	}
	return pkgs
}

// canonical sorts a rule's patterns in their absolute form, so that the
// table and rules() compare whatever order they are written in.
func canonical(patterns []string) string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = strings.TrimPrefix(full(p), module+"/")
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func TestArchitectureTableListsEveryPackageAndItsEnforcedRule(t *testing.T) {
	root := repoRoot(t)
	rows := packageTable(t, root)
	enforced := map[string]rule{}
	for _, r := range append(rules(), tableRules()...) {
		if inTable(r.pkg) {
			enforced[r.pkg] = r
		}
	}
	listed := map[string]int{}
	for _, r := range rows {
		if first, dup := listed[r.pkg]; dup {
			t.Errorf("docs/architecture.md:%d lists %s again (first on line %d)", r.line, r.pkg, first)
		}
		listed[r.pkg] = r.line
		want, has := enforced[r.pkg]
		switch {
		case !has && len(r.never) > 0:
			t.Errorf("docs/architecture.md:%d says %s never imports %s, but rules_test.go enforces no rule for it",
				r.line, r.pkg, canonical(r.never))
		case has && canonical(r.never) != canonical(want.never):
			t.Errorf("docs/architecture.md:%d says %s never imports [%s]; rules_test.go enforces [%s] (%s)",
				r.line, r.pkg, canonical(r.never), canonical(want.never), want.states)
		}
		if _, support := testSupport[r.pkg]; support != r.testSupport {
			t.Errorf("docs/architecture.md:%d: %s is test support in the table: %t, in rules_test.go: %t",
				r.line, r.pkg, r.testSupport, support)
		}
	}
	pkgs := modulePackages(t, root)
	for _, p := range pkgs {
		if _, ok := listed[p]; !ok {
			t.Errorf("%s is missing from the package table of docs/architecture.md", p)
		}
	}
	for p, line := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("docs/architecture.md:%d lists %s, which go list does not know", line, p)
		}
	}
}
