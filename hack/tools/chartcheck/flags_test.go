package chartcheck

import (
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// managerContainers renders the chart and returns, for each of its two
// Deployments (the fleet manager and the storage controller, by name), the
// manager container's image and its args as flag name → value.
func managerContainers(t *testing.T, set ...string) map[string]managerContainer {
	t.Helper()
	deployments := ofKind(render(t, set...), "Deployment")
	out := map[string]managerContainer{}
	for _, o := range deployments {
		if o.Namespace != releaseNamespace {
			continue
		}
		var d appsv1.Deployment
		o.decode(t, &d)
		if d.Spec.Template.Spec.ServiceAccountName != o.Name {
			t.Errorf("Deployment %s must run as its own ServiceAccount %s, the subject of its bindings; got %q", o.Name, o.Name, d.Spec.Template.Spec.ServiceAccountName)
		}
		image, args := managerArgs(t, o.Name, d)
		out[o.Name] = managerContainer{image, args}
	}
	if _, ok := out[managerName]; !ok || len(out) != 2 {
		t.Fatalf("the chart must render two Deployments in %s, %s and %s; got %v", releaseNamespace, managerName, storageControllerName, deployments)
	}
	if _, ok := out[storageControllerName]; !ok {
		t.Fatalf("the chart must render the Deployment %s/%s; got %v", releaseNamespace, storageControllerName, deployments)
	}
	return out
}

// managerContainer is one Deployment's manager container: its image and its
// args as flag name → value.
type managerContainer struct {
	image string
	args  map[string]string
}

func managerArgs(t *testing.T, deployment string, d appsv1.Deployment) (image string, args map[string]string) {
	t.Helper()
	manager := containerNamed(d.Spec.Template.Spec.Containers, "manager")
	if manager == nil {
		t.Fatalf("the %s Pod must have a container named manager; got %v", deployment, d.Spec.Template.Spec.Containers)
	}
	args = map[string]string{}
	for _, a := range manager.Args {
		name, value, ok := strings.Cut(a, "=")
		if !ok {
			t.Errorf("manager arg %q must be written --flag=value so its value is unambiguous", a)
		}
		if _, dup := args[name]; dup {
			t.Errorf("manager flag %s must be passed once", name)
		}
		args[name] = value
	}
	return manager.Image, args
}

// managerFlags are the flag names cmd/manager/flags.go defines.
func managerFlags(t *testing.T) map[string]bool {
	t.Helper()
	src := string(readFile(t, repoPath("cmd", "manager", "flags.go")))
	defs := regexp.MustCompile(`fs\.\w+\((?:&[\w.]+, )?"([a-z][a-z-]*)"`).FindAllStringSubmatch(src, -1)
	flags := map[string]bool{}
	for _, d := range defs {
		flags["--"+d[1]] = true
	}
	if !flags["--member-replacement-delay"] {
		t.Fatalf("cmd/manager/flags.go must define --member-replacement-delay (docs/fleet-operator.md, \"Self-healing\"); found %v", flags)
	}
	return flags
}

func TestChartPassesTheManagerFlags(t *testing.T) {
	known := managerFlags(t)
	// Each case's flags are the fleet manager's unless they belong to the
	// storage controller (storage).
	cases := []struct {
		name    string
		set     []string
		want    map[string]string
		storage map[string]string
	}{
		{name: "defaults", want: map[string]string{
			"--controllers": "fleet", "--member-replacement-delay": "10m", "--fleet-namespaces": "celld", "--leader-elect": "true",
			"--log-level": "INFO", "--storage-namespace": storageNamespace,
		}, storage: map[string]string{
			"--controllers": "storage", "--leader-elect": "true", "--log-level": "INFO",
			"--storage-namespace": storageNamespace, "--manager-namespace": releaseNamespace, "--csi-controller-socket": "unix:///csi/csi.sock",
		}},
		{name: "another storage namespace", set: []string{"--set", "storageNamespace=st"}, want: map[string]string{"--storage-namespace": "st"},
			storage: map[string]string{"--storage-namespace": "st"}},
		{name: "5m and two namespaces", set: []string{"--set", "memberReplacementDelay=5m", "--set", "fleetNamespaces={a,b}"}, want: map[string]string{
			"--member-replacement-delay": "5m", "--fleet-namespaces": "a,b",
		}},
		{name: "the minimum in seconds", set: []string{"--set", "memberReplacementDelay=60s"}, want: map[string]string{"--member-replacement-delay": "60s"}},
		{name: "the minimum in minutes", set: []string{"--set", "memberReplacementDelay=1m"}, want: map[string]string{"--member-replacement-delay": "1m"}},
		{name: "hours and minutes", set: []string{"--set", "memberReplacementDelay=1h30m"}, want: map[string]string{"--member-replacement-delay": "1h30m"}},
		{name: "seconds past a minute", set: []string{"--set", "memberReplacementDelay=0m61s"}, want: map[string]string{"--member-replacement-delay": "0m61s"}},
		{name: "no leader election, debug logs", set: []string{"--set", "leaderElect=false", "--set", "logLevel=DEBUG"}, want: map[string]string{
			"--leader-elect": "false", "--log-level": "DEBUG",
		}, storage: map[string]string{"--leader-elect": "false", "--log-level": "DEBUG"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			containers := managerContainers(t, tc.set...)
			for deployment, want := range map[string]map[string]string{managerName: tc.want, storageControllerName: tc.storage} {
				c := containers[deployment]
				if pinned := testRepository + "@" + testDigest; c.image != pinned {
					t.Errorf("%s's manager image must be pinned by digest as %q; got %q", deployment, pinned, c.image)
				}
				for name, value := range want {
					if got, ok := c.args[name]; !ok || got != value {
						t.Errorf("%s must be started with %s=%s; got args %v", deployment, name, value, c.args)
					}
				}
				for name := range c.args {
					if !known[name] {
						t.Errorf("the chart passes %s to %s, which cmd/manager/flags.go does not define: the manager would refuse to start", name, deployment)
					}
				}
			}
			// A flag of the other half makes the manager refuse to start
			// (cmd/manager/flags.go, flagHalves).
			for _, f := range []string{"--csi-controller-socket", "--manager-namespace", "--replica-replacement-delay"} {
				if _, ok := containers[managerName].args[f]; ok {
					t.Errorf("the fleet manager must not be passed %s, a flag of the storage controller", f)
				}
			}
			for _, f := range []string{"--member-replacement-delay", "--fleet-namespaces"} {
				if _, ok := containers[storageControllerName].args[f]; ok {
					t.Errorf("the storage controller must not be passed %s, a flag of the fleet manager", f)
				}
			}
		})
	}
}

// Values the chart must refuse at render time, each with the words a user
// needs to fix it. A delay below one minute passes the schema's pattern and
// is refused by the template with the documented minimum, 1m
// (docs/fleet-operator.md, "Self-healing"), in the message.
func TestChartRefusesBadValuesAtRenderTime(t *testing.T) {
	const belowMinimum = "is below the minimum of 1m"
	cases := []struct {
		name string
		args []string
		want []string // substrings of helm's error output
	}{
		{name: "30s delay", args: templateArgs("--set", "memberReplacementDelay=30s"), want: []string{"memberReplacementDelay=30s " + belowMinimum}},
		{name: "59s delay", args: templateArgs("--set", "memberReplacementDelay=59s"), want: []string{"memberReplacementDelay=59s " + belowMinimum}},
		{name: "0m59s delay", args: templateArgs("--set", "memberReplacementDelay=0m59s"), want: []string{"memberReplacementDelay=0m59s " + belowMinimum}},
		{name: "zero delay", args: templateArgs("--set", "memberReplacementDelay=0m"), want: []string{"memberReplacementDelay=0m " + belowMinimum}},
		{name: "fractional delay", args: templateArgs("--set", "memberReplacementDelay=1.5h"), want: []string{"memberReplacementDelay"}},
		{name: "millisecond delay", args: templateArgs("--set", "memberReplacementDelay=60000ms"), want: []string{"memberReplacementDelay"}},
		{name: "negative delay", args: templateArgs("--set", "memberReplacementDelay=-10m"), want: []string{"memberReplacementDelay"}},
		{name: "delay without unit", args: templateArgs("--set", "memberReplacementDelay=600"), want: []string{"memberReplacementDelay"}},
		{name: "empty delay", args: templateArgs("--set", "memberReplacementDelay="), want: []string{"memberReplacementDelay"}},
		{name: "no digest", args: bareTemplateArgs("--set", "image.repository="+testRepository), want: []string{"image.digest is required"}},
		{name: "no repository", args: bareTemplateArgs("--set", "image.digest="+testDigest), want: []string{"image.repository is required"}},
		{name: "tag instead of digest", args: templateArgs("--set", "image.digest=latest"), want: []string{"/image/digest"}},
		{name: "no fleet namespace", args: templateArgs("--set", "fleetNamespaces=null"), want: []string{"fleetNamespaces"}},
		{name: "invalid fleet namespace", args: templateArgs("--set", "fleetNamespaces={Fleet_A}"), want: []string{"fleetNamespaces"}},
		{name: "unknown value", args: templateArgs("--set", "memberReplacmentDelay=5m"), want: []string{"memberReplacmentDelay"}},
		{name: "storage namespace is the release namespace", args: templateArgs("--set", "storageNamespace="+releaseNamespace),
			want: []string{"storageNamespace=" + releaseNamespace + " is the release namespace"}},
		{name: "a fleet namespace is the storage namespace", args: templateArgs("--set", "fleetNamespaces={celld,"+storageNamespace+"}"),
			want: []string{"fleetNamespaces includes " + storageNamespace + ", the storage namespace"}},
		{name: "a fleet namespace is another storage namespace", args: templateArgs("--set", "storageNamespace=st", "--set", "fleetNamespaces={st}"),
			want: []string{"fleetNamespaces includes st, the storage namespace", "backing claims"}},
		{name: "no node plugin digest", args: templateArgs("--set", "storageImages.csiNode.digest="), want: []string{"storageImages.csiNode.digest is required"}},
		{name: "resizer by tag", args: templateArgs("--set", "storageImages.csiResizer.digest=v2.3.0"), want: []string{"/storageImages/csiResizer/digest"}},
		{name: "even replicas", args: templateArgs("--set", "replicas=2"), want: []string{"replicas"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, err := runHelm(t, tc.args...)
			if err == nil {
				t.Fatalf("helm %s must be refused; it rendered:\n%.400s", strings.Join(tc.args[1:], " "), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("refusing %s must say %q; helm said:\n%s", tc.name, w, errOut)
				}
			}
		})
	}
}
