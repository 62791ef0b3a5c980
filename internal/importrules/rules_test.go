package importrules

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cellfleet/cellfleet"

// Import-path patterns, relative to the module unless they hold a dot in
// their first element: "x" is package x only, "x/..." is x and below.
const (
	worker     = "internal/replica" // the worker package itself, not its subpackages
	stateMach  = "internal/replica/fsm/..."
	muxPkg     = "internal/replica/mux/..."
	host       = "internal/replica/host/..."
	client     = "internal/replica/client/..."
	raft       = "github.com/hashicorp/raft/..."
	fusePkgs   = "internal/fuse/..."
	owner      = "internal/mountowner" // the owner's implementation; its api package is allowed
	localDrv   = "internal/csi/local/..."
	replDrv    = "internal/csi/replicated/..."
	grpc       = "google.golang.org/grpc/..."
	controller = "internal/controller/..."
	apiTypes   = "api/..."
)

var kubernetes = []string{"k8s.io/...", "sigs.k8s.io/..."}

// A rule is one doc comment's "must never import".
type rule struct {
	pkg    string   // the package the rule binds
	never  []string // patterns it must never reach
	except []string // patterns that never match, even under a forbidden one
	states string   // the file whose doc comment states the rule
	tests  bool     // the package is tests only: check its test imports
	gowork string   // GOWORK for a module outside go.work ("off")
}

func rules() []rule {
	k8s := func(p ...string) []string { return append(p, kubernetes...) }
	return []rule{
		{pkg: "internal/fuse", never: k8s(worker, stateMach, raft, owner), states: "internal/fuse/doc.go"},
		{pkg: "internal/csi/server", never: []string{localDrv, replDrv}, states: "internal/csi/server/server.go"},
		{pkg: "internal/csi/mountpath", never: []string{localDrv, replDrv, grpc}, states: "internal/csi/mountpath/mountpath.go"},
		{pkg: "internal/csi/replicated", never: []string{fusePkgs, owner, localDrv}, states: "internal/csi/replicated/driver.go"},
		{pkg: "internal/csi/publication", never: []string{grpc, localDrv, replDrv}, states: "internal/csi/publication/doc.go"},
		{pkg: "internal/csi/nodereq", never: []string{localDrv, replDrv}, states: "internal/csi/nodereq/nodereq.go"},
		{pkg: "internal/csi/local", never: []string{replDrv}, states: "internal/csi/local/driver.go"},
		{pkg: "internal/csi/replicated/controller", never: []string{"internal/controller/volume", localDrv},
			states: "internal/csi/replicated/controller/controller.go"},
		{pkg: "internal/celldctl", never: []string{controller}, states: "internal/celldctl/doc.go"},
		{pkg: "internal/durable", never: []string{"..."}, except: []string{"internal/durable"}, states: "internal/durable/durable.go"},
		{pkg: "internal/directio", never: []string{"..."}, except: []string{"internal/directio"}, states: "internal/directio/directio.go"},
		{pkg: "internal/mountowner/api", never: k8s(fusePkgs, client), states: "internal/mountowner/api/types.go"},
		{pkg: "internal/mountowner", never: k8s(worker, stateMach, raft), states: "internal/mountowner/owner.go"},
		{pkg: "internal/replica/journal", never: []string{stateMach, worker, muxPkg, host}, states: "internal/replica/journal/doc.go"},
		{pkg: "internal/replica/chunkstore", never: []string{stateMach, "internal/replica/journal/...", worker, host, raft, muxPkg, "internal/replica/raftnet/..."},
			states: "internal/replica/chunkstore/doc.go"},
		{pkg: "internal/replica/pki", never: []string{worker, host, client}, states: "internal/replica/pki/pki.go"},
		{pkg: "internal/replica", never: k8s(host, client), states: "internal/replica/doc.go"},
		{pkg: "internal/replica/fsm", never: []string{worker, muxPkg, host, client}, states: "internal/replica/fsm/doc.go"},
		{pkg: "internal/replica/mux", never: []string{stateMach, host, client}, states: "internal/replica/mux/doc.go"},
		{pkg: "internal/replica/raftnet", never: []string{stateMach, "internal/replica/journal/...", host}, states: "internal/replica/raftnet/doc.go"},
		{pkg: "internal/replica/wire", never: []string{raft, stateMach, muxPkg, client}, states: "internal/replica/wire/doc.go"},
		{pkg: "internal/replica/client", never: []string{worker, stateMach, raft}, states: "internal/replica/client/doc.go"},
		{pkg: "internal/replica/host", never: []string{client, fusePkgs}, states: "internal/replica/host/doc.go"},
		{pkg: "internal/controller/fleet", states: "internal/controller/fleet/doc.go",
			never: []string{"api/storage/...", "internal/replica/...", fusePkgs, "internal/mountowner/...", "internal/csi/..."}},
		{pkg: "test/celldsim/internal/member", never: k8s(controller, apiTypes), states: "test/celldsim/internal/member/member.go"},
		{pkg: "test/celldsim/internal/store", never: []string{"test/celldsim/internal/member", "net/http/..."}, states: "test/celldsim/internal/store/store.go"},
		{pkg: "test/e2e/load", never: k8s(controller, apiTypes), states: "test/e2e/load/load.go"},
		{pkg: "test/e2e/cluster", never: []string{"internal/...", "cmd/..."}, states: "test/e2e/cluster/cluster.go"},
		{pkg: "hack/tools/chartcheck", never: []string{"..."}, except: []string{"hack/tools/..."},
			states: "hack/tools/chartcheck/doc.go", tests: true, gowork: "off"},
	}
}

// testSupport are the packages whose doc comments say production code must
// never import them.
var testSupport = map[string]string{
	"hack/internal/localvolume":        "hack/internal/localvolume/localvolume.go",
	"internal/testfs/powercut":         "internal/testfs/powercut/doc.go",
	"internal/testfs/memdir":           "internal/testfs/memdir/memdir.go",
	"internal/csi/csitest":             "internal/csi/csitest/csitest.go",
	"internal/csi/csitest/loopowner":   "internal/csi/csitest/loopowner/loopowner.go",
	"internal/testenv":                 "internal/testenv/testenv.go",
	"internal/testsupport/proccluster": "internal/testsupport/proccluster/doc.go",
	"internal/testsupport/poll":        "internal/testsupport/poll/poll.go",
	"internal/testsupport/tcpproxy":    "internal/testsupport/tcpproxy/tcpproxy.go",
	"internal/testenv/nodestack":       "internal/testenv/nodestack/nodestack.go",
}

// production reports whether pkg is production code: not test support and
// not one of the test programs (those under test/, and the programs of
// hack/ that run the binaries on this machine: the demo, the nemesis on the
// power-cut filesystem and the fio benchmark).
func production(pkg string) bool {
	_, support := testSupport[pkg]
	return !support && !strings.HasPrefix(pkg, "test/") && !slices.Contains(localPrograms, pkg) &&
		pkg != "internal/replica/processtest" && pkg != "internal/importrules"
}

// localPrograms run the binaries on this machine through
// hack/internal/localvolume.
var localPrograms = []string{"hack/chaos", "hack/demo", "hack/fiobench"}

// full turns a pattern into an absolute import-path pattern: one whose
// first element holds a dot, or names no top folder of this module, is
// already absolute (a module elsewhere, the standard library).
func full(p string) string {
	if p == "..." {
		return module + "/..."
	}
	first, _, _ := strings.Cut(p, "/")
	if strings.Contains(first, ".") || !slices.Contains([]string{"internal", "api", "cmd", "hack", "test"}, first) {
		return p
	}
	return module + "/" + p
}

func matches(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

// graph is import path -> its direct imports, for every package that
// `go list -deps` reaches.
type graph map[string][]string

func listDeps(t *testing.T, root, dir, gowork string, tests bool, patterns ...string) graph {
	t.Helper()
	args := []string{"list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}"}
	if tests {
		args = append(args, "-test")
	}
	cmd := exec.Command("go", append(args, patterns...)...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = os.Environ()
	if gowork != "" {
		cmd.Env = append(cmd.Env, "GOWORK="+gowork)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(cmd.Args[1:], " "), cmd.Dir, err, stderr.String())
	}
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		// A test variant prints as "p [p.test]": its name is p's.
		name, imports := f[0], f[1:]
		if len(imports) > 0 && strings.HasPrefix(imports[0], "[") {
			imports = imports[1:]
		}
		var clean []string
		for _, imp := range imports {
			if !strings.HasPrefix(imp, "[") {
				clean = append(clean, imp)
			}
		}
		g[name] = append(g[name], clean...)
	}
	return g
}

// path finds the shortest import chain from pkg to a package that bad
// accepts, or nil.
func (g graph) path(pkg string, bad func(string) bool) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			if bad(imp) {
				chain := []string{imp}
				for q := p; q != ""; q = prev[q] {
					chain = append([]string{q}, chain...)
				}
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

func short(chain []string) string {
	out := make([]string, len(chain))
	for i, c := range chain {
		out[i] = strings.TrimPrefix(c, module+"/")
	}
	return strings.Join(out, " -> ")
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func TestPackagesNeverImportWhatTheirDocCommentsForbid(t *testing.T) {
	root := repoRoot(t)
	work := listDeps(t, root, ".", "", false, "./...", "./test/e2e/...")
	graphs := map[string]graph{}
	for _, r := range rules() {
		g := work
		if r.gowork != "" || r.tests {
			dir, _ := strings.CutSuffix(r.pkg, "/"+filepath.Base(r.pkg))
			key := dir + r.gowork
			if graphs[key] == nil {
				graphs[key] = listDeps(t, root, dir, r.gowork, r.tests, "./...")
			}
			g = graphs[key]
		}
		subject := module + "/" + r.pkg
		if _, ok := g[subject]; !ok {
			t.Errorf("%s (rule in %s) is not a package go list knows: fix the rule", r.pkg, r.states)
			continue
		}
		bad := func(p string) bool {
			for _, e := range r.except {
				if matches(full(e), p) {
					return false
				}
			}
			for _, n := range r.never {
				if matches(full(n), p) {
					return true
				}
			}
			return false
		}
		starts := []string{subject}
		if r.tests {
			// The test binary's variants carry the test imports.
			starts = append(starts, subject+".test")
		}
		for _, s := range starts {
			if chain := g.path(s, bad); chain != nil {
				t.Errorf("%s must never import %s (%s says so), but imports it: %s",
					r.pkg, strings.TrimPrefix(chain[len(chain)-1], module+"/"), r.states, short(chain))
			}
		}
	}
	for pkg := range work {
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok || !production(rel) {
			continue
		}
		chain := work.path(pkg, func(p string) bool {
			_, support := testSupport[strings.TrimPrefix(p, module+"/")]
			return support
		})
		if chain != nil {
			dep := strings.TrimPrefix(chain[len(chain)-1], module+"/")
			t.Errorf("production code must never import the test support %s (%s says so): %s", dep, testSupport[dep], short(chain))
		}
	}
}

var statesRule = regexp.MustCompile(`(?i)(never|must not) import`)

// TestEveryStatedRuleIsEnforced keeps the list above whole: a doc comment
// that states a new import rule fails here until the rule is listed.
func TestEveryStatedRuleIsEnforced(t *testing.T) {
	root := repoRoot(t)
	listed := map[string]bool{}
	for _, r := range rules() {
		listed[r.states] = true
	}
	for _, f := range testSupport {
		listed[f] = true
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") && statesRule.MatchString(line) && !listed[rel] {
				t.Errorf("%s:%d states an import rule that rules_test.go does not enforce: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(fmt.Errorf("walk %s: %w", root, err))
	}
}
