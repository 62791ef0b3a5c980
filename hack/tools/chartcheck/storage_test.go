package chartcheck

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Names and paths the storage half is installed with (docs/install.md, "The
// storage half").
const (
	localDriver      = "local.storage.eric.dev"
	replicatedDriver = "replicated.storage.eric.dev"
	localClass       = "cellfleet-local"
	replicatedClass  = "cellfleet-replicated"
	pluginsRegistry  = "/var/lib/kubelet/plugins_registry"
)

// replicaHostResources are the replica host's requests and limits in the NODE
// DaemonSet (docs/install.md, "The storage half").
var replicaHostResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("768Mi")},
}

func containerNamed(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

// flagValue is the value of --name=value (or -name=value) in args, and
// whether a bare --name was passed.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		n, v, hasValue := strings.Cut(a, "=")
		if strings.TrimLeft(n, "-") == name {
			if !hasValue {
				return "true", true
			}
			return v, true
		}
	}
	return "", false
}

func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volumeNamed(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// checkStorageHalf asserts what the storage half installs (docs/install.md,
// "The storage half" and "Two Deployments"), on the objects of a chart
// rendering or a kustomize build: the storage controller's CSI controller
// socket shared with its csi-provisioner and csi-resizer sidecars, as its
// own ServiceAccount, and a fleet manager Pod that runs none of it; the NODE
// DaemonSet in the storage namespace with the documented propagation,
// resources and downward-API environment; both CSIDrivers; both
// StorageClasses.
func checkStorageHalf(t *testing.T, objs []object, storageNS string) {
	t.Helper()
	var manager, storage appsv1.Deployment
	decodeOne(t, objs, "Deployment", "", managerName, &manager)
	decodeOne(t, objs, "Deployment", "", storageControllerName, &storage)
	checkFleetManagerAlone(t, manager.Spec.Template.Spec)
	checkStorageControllerPod(t, storage.Spec.Template.Spec)
	known := managerFlags(t)
	for _, d := range []appsv1.Deployment{manager, storage} {
		if c := containerNamed(d.Spec.Template.Spec.Containers, "manager"); c != nil {
			for _, a := range c.Args {
				if name, _, _ := strings.Cut(a, "="); !known[name] {
					t.Errorf("%s passes %s, which cmd/manager/flags.go does not define: the manager would refuse to start", d.Name, name)
				}
			}
		}
	}
	var node appsv1.DaemonSet
	decodeOne(t, objs, "DaemonSet", storageNS, nodeName, &node)
	checkNodeDaemonSet(t, &node)
	checkDriversAndClasses(t, objs, storageNS)
}

// decodeOne decodes the one object of kind and name (in namespace, unless
// empty) into into, or fails the test.
func decodeOne(t *testing.T, objs []object, kind, namespace, name string, into any) {
	t.Helper()
	for _, o := range ofKind(objs, kind) {
		if o.Name == name && (namespace == "" || o.Namespace == namespace) {
			o.decode(t, into)
			return
		}
	}
	t.Fatalf("no %s %s/%s among %v", kind, namespace, name, ofKind(objs, kind))
}

// checkFleetManagerAlone fails unless the fleet manager's Pod runs the fleet
// operator alone: one container, --controllers=fleet, no CSI socket, as its
// own ServiceAccount.
func checkFleetManagerAlone(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	if spec.ServiceAccountName != managerName {
		t.Errorf("the fleet manager must run as ServiceAccount %s; got %q", managerName, spec.ServiceAccountName)
	}
	if len(spec.Containers) != 1 || spec.Containers[0].Name != "manager" {
		var names []string
		for _, c := range spec.Containers {
			names = append(names, c.Name)
		}
		t.Fatalf("the fleet manager Pod must run the manager container alone (the CSI sidecars run in %s); it runs %v", storageControllerName, names)
	}
	args := spec.Containers[0].Args
	if c, _ := flagValue(args, "controllers"); c != "fleet" {
		t.Errorf("the fleet manager must run --controllers=fleet; args %v", args)
	}
	if _, ok := flagValue(args, "csi-controller-socket"); ok {
		t.Errorf("the fleet manager must not serve the CSI controller; args %v", args)
	}
}

// checkStorageControllerPod fails unless the storage controller's Pod runs
// the manager with --controllers=storage, serving the CSI controller to its
// two sidecars over a shared socket, as its own ServiceAccount.
func checkStorageControllerPod(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	if spec.ServiceAccountName != storageControllerName {
		t.Errorf("the storage controller must run as its own ServiceAccount %s; got %q", storageControllerName, spec.ServiceAccountName)
	}
	mgr := containerNamed(spec.Containers, "manager")
	if mgr == nil {
		t.Fatal("the storage controller Pod must run a container named manager")
	}
	if c, _ := flagValue(mgr.Args, "controllers"); c != "storage" {
		t.Errorf("the storage controller must run --controllers=storage; args %v", mgr.Args)
	}
	socket, ok := flagValue(mgr.Args, "csi-controller-socket")
	if !ok || !strings.HasPrefix(socket, "unix:///") {
		t.Fatalf("the storage controller must serve the replicated CSI controller on --csi-controller-socket=unix:///...; args %v", mgr.Args)
	}
	socketPath := strings.TrimPrefix(socket, "unix://")
	socketDir := socketPath[:strings.LastIndex(socketPath, "/")]
	shared := mountAt(mgr, socketDir)
	if shared == nil {
		t.Fatalf("the storage controller must mount a volume at %s, the directory of its CSI socket; mounts %v", socketDir, mgr.VolumeMounts)
	}
	if v := volumeNamed(spec, shared.Name); v == nil || v.EmptyDir == nil {
		t.Errorf("the socket directory %s must be an emptyDir shared by the Pod's containers; got %+v", socketDir, v)
	}
	for _, sc := range []struct {
		name  string
		flags []string
	}{
		{"csi-provisioner", []string{"extra-create-metadata", "leader-election", "timeout"}},
		{"csi-resizer", []string{"leader-election", "timeout"}},
	} {
		c := containerNamed(spec.Containers, sc.name)
		if c == nil {
			t.Errorf("the storage controller Pod must run the %s sidecar for %s", sc.name, replicatedDriver)
			continue
		}
		if addr, _ := flagValue(c.Args, "csi-address"); addr != socketPath {
			t.Errorf("%s must talk to the CSI controller's socket: --csi-address=%s; args %v", sc.name, socketPath, c.Args)
		}
		if m := mountAt(c, socketDir); m == nil || m.Name != shared.Name {
			t.Errorf("%s must mount the CSI controller's socket volume %s at %s; mounts %v", sc.name, shared.Name, socketDir, c.VolumeMounts)
		}
		for _, f := range sc.flags {
			if v, ok := flagValue(c.Args, f); !ok || v == "false" {
				t.Errorf("%s must be started with --%s; args %v", sc.name, f, c.Args)
			}
		}
		if c.SecurityContext == nil || c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			t.Errorf("%s must run unprivileged with a security context; got %+v", sc.name, c.SecurityContext)
		}
	}
}

func checkNodeDaemonSet(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	if got := ds.Spec.Template.Labels["app.kubernetes.io/component"]; got != "node" || ds.Labels["app.kubernetes.io/component"] != "node" {
		t.Errorf("the NODE DaemonSet and its Pods must carry app.kubernetes.io/component: node; got %v / %v", ds.Labels, ds.Spec.Template.Labels)
	}
	spec := ds.Spec.Template.Spec
	if spec.ServiceAccountName == "" || spec.ServiceAccountName == managerName || spec.ServiceAccountName == storageControllerName {
		t.Errorf("the NODE DaemonSet must run as its own ServiceAccount, not %q", spec.ServiceAccountName)
	}
	hostPath := func(m *corev1.VolumeMount) string {
		if v := volumeNamed(spec, m.Name); v != nil && v.HostPath != nil {
			return v.HostPath.Path
		}
		return ""
	}

	local := containerNamed(spec.Containers, "csi-node")
	if local == nil {
		t.Fatal("the NODE DaemonSet must run csi-node")
	}
	if d, _ := flagValue(local.Args, "driver"); d != localDriver {
		t.Errorf("csi-node must serve --driver=%s; args %v", localDriver, local.Args)
	}
	if local.SecurityContext == nil || local.SecurityContext.Privileged == nil || !*local.SecurityContext.Privileged {
		t.Errorf("csi-node must be privileged (mount propagation, mounts)")
	}
	kubelet := mountAt(local, "/var/lib/kubelet")
	if kubelet == nil || kubelet.MountPropagation == nil || *kubelet.MountPropagation != corev1.MountPropagationBidirectional || hostPath(kubelet) != "/var/lib/kubelet" {
		t.Errorf("csi-node must mount the host's /var/lib/kubelet Bidirectional; got %+v", kubelet)
	}
	if m := mountAt(local, "/dev/fuse"); m == nil || hostPath(m) != "/dev/fuse" {
		t.Errorf("csi-node must mount the host's /dev/fuse; mounts %v", local.VolumeMounts)
	}
	for _, name := range []string{"csi-node", "csi-node-replicated"} {
		c := containerNamed(spec.Containers, name)
		if c == nil {
			t.Errorf("the NODE DaemonSet must run %s", name)
			continue
		}
		if m := mountAt(c, pluginsRegistry); m == nil || hostPath(m) != pluginsRegistry {
			t.Errorf("%s registers its driver with kubelet itself: it must mount the host's %s; mounts %v", name, pluginsRegistry, c.VolumeMounts)
		}
		ep, _ := flagValue(c.Args, "endpoint")
		dir, _ := flagValue(c.Args, "plugin-registration-dir")
		path, _ := flagValue(c.Args, "kubelet-registration-path")
		if dir != pluginsRegistry || "unix://"+path != ep {
			t.Errorf("%s must register with --plugin-registration-dir=%s and announce its --endpoint %s as --kubelet-registration-path; got %q, %q",
				name, pluginsRegistry, ep, dir, path)
		}
	}
	consumer, ok := flagValue(local.Args, "consumer-mount-root")
	if !ok || consumer == "" {
		t.Fatalf("csi-node must be started with --consumer-mount-root (docs/architecture.md, \"Rules of the storage half\"); args %v", local.Args)
	}
	// The publication lock lives beside the root (<root>.publication.lock),
	// so csi-node mounts the root's parent: the lock is the host's, and the
	// root's publications propagate to the host through it.
	parent := filepath.Dir(consumer)
	cm := mountAt(local, parent)
	if cm == nil || cm.MountPropagation == nil || *cm.MountPropagation != corev1.MountPropagationBidirectional || hostPath(cm) != parent {
		t.Errorf("csi-node must mount the host's %s, the parent of --consumer-mount-root=%s, Bidirectional (docs/architecture.md, \"Rules of the storage half\"; the publication lock lives beside the root); got %+v",
			parent, consumer, cm)
	}

	checkCSINodeFlags(t, spec)

	host := containerNamed(spec.Containers, "replica-host")
	if host == nil {
		t.Fatal("the NODE DaemonSet must run replica-host")
	}
	hm := mountAt(host, consumer)
	if hm == nil || hm.MountPropagation == nil || *hm.MountPropagation != corev1.MountPropagationHostToContainer || hostPath(hm) != consumer {
		t.Errorf("replica-host must consume the consumer mount root %s HostToContainer (docs/architecture.md, \"Rules of the storage half\"); got %+v", consumer, hm)
	}
	if !reflect.DeepEqual(normalised(host.Resources), normalised(replicaHostResources)) {
		t.Errorf("replica-host must request 100m CPU / 128Mi and be limited to 2 CPU / 768Mi (docs/architecture.md, \"Rules of the storage half\"); got %+v", host.Resources)
	}
	env := map[string]string{}
	for _, e := range host.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["NODE_NAME"] != "spec.nodeName" || env["POD_IP"] != "status.podIP" {
		t.Errorf("replica-host must get NODE_NAME (spec.nodeName) and POD_IP (status.podIP) from the downward API; got %v", env)
	}
	for _, f := range []string{"node", "namespace", "pod-ip", "state-dir", "status-listen"} {
		if _, ok := flagValue(host.Args, f); !ok {
			t.Errorf("replica-host must be started with -%s (Kubernetes mode); args %v", f, host.Args)
		}
	}
	if root, _ := flagValue(host.Args, "consumer-mount-root"); root != consumer {
		t.Errorf("replica-host must read publications at csi-node's --consumer-mount-root=%s; it has -consumer-mount-root=%q", consumer, root)
	}
	// The host asks the local driver for each publication (docs/csi.md, "How
	// the replica host asks for the publication"): it dials csi-node's own
	// endpoint, whose host directory it mounts at the same path.
	localEP, _ := flagValue(local.Args, "endpoint")
	if ep, _ := flagValue(host.Args, "local-csi-endpoint"); ep == "" || ep != localEP {
		t.Errorf("replica-host must be started with -local-csi-endpoint=%s (the local driver's --endpoint); got %q", localEP, ep)
	}
	sockDir := filepath.Dir(strings.TrimPrefix(localEP, "unix://"))
	if m := mountAt(host, sockDir); m == nil || hostPath(m) != sockDir {
		t.Errorf("replica-host must mount the local driver's socket directory %s (host path %s); got %+v", sockDir, sockDir, m)
	}
	if sd, _ := flagValue(host.Args, "state-dir"); sd == "" || mountAt(host, sd) == nil || hostPath(mountAt(host, sd)) == "" {
		t.Errorf("replica-host keeps identity and initialisation history on host storage (docs/architecture.md, \"Rules of the storage half\"): -state-dir=%s must be a hostPath mount; mounts %v", sd, host.VolumeMounts)
	}
	if host.ReadinessProbe == nil {
		t.Errorf("replica-host needs a readiness probe: placement requires a ready replica-host container (docs/architecture.md, \"Rules of the storage half\")")
	}

	prov := containerNamed(spec.Containers, "csi-provisioner")
	if prov == nil {
		t.Fatal("the NODE DaemonSet must run the local driver's csi-provisioner")
	}
	for _, f := range []string{"node-deployment", "enable-capacity"} {
		if v, ok := flagValue(prov.Args, f); !ok || v == "false" {
			t.Errorf("the node csi-provisioner must run with --%s; args %v", f, prov.Args)
		}
	}
	penv := map[string]bool{}
	for _, e := range prov.Env {
		penv[e.Name] = e.ValueFrom != nil
	}
	for _, name := range []string{"NODE_NAME", "POD_NAME", "NAMESPACE"} {
		if !penv[name] {
			t.Errorf("the node csi-provisioner needs %s from the downward API (--node-deployment, capacity owner); env %v", name, prov.Env)
		}
	}
	addr, _ := flagValue(prov.Args, "csi-address")
	pm := mountAt(prov, addr[:max(strings.LastIndex(addr, "/"), 0)])
	if pm == nil || hostPath(pm) != "/var/lib/kubelet/plugins/"+localDriver {
		t.Errorf("the node csi-provisioner must reach the local plugin's socket in /var/lib/kubelet/plugins/%s; --csi-address=%s, mounts %v", localDriver, addr, prov.VolumeMounts)
	}
	if ep, _ := flagValue(local.Args, "endpoint"); ep != "unix:///var/lib/kubelet/plugins/"+localDriver+"/csi.sock" || addr[strings.LastIndex(addr, "/"):] != "/csi.sock" {
		t.Errorf("csi-node's --endpoint %q and the provisioner's --csi-address %q must name the same socket", ep, addr)
	}
}

// checkCSINodeFlags fails when a csi-node container passes a flag its
// subcommand does not define (the container would exit at start).
func checkCSINodeFlags(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	defined := map[string]map[string]bool{
		"plugin":      definedFlags(t, "cmd", "csi-node", "flags.go"),
		"mount-owner": definedFlags(t, "cmd", "csi-node", "mountowner.go"),
	}
	for _, name := range []string{"csi-node", "csi-node-replicated", "mount-owner"} {
		c := containerNamed(spec.Containers, name)
		if c == nil {
			t.Errorf("the NODE DaemonSet must run %s", name)
			continue
		}
		if len(c.Args) == 0 || defined[c.Args[0]] == nil {
			t.Errorf("%s must start csi-node with a subcommand (plugin or mount-owner) as its first arg; args %v", name, c.Args)
			continue
		}
		for _, a := range c.Args[1:] {
			flagName, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !defined[c.Args[0]][flagName] {
				t.Errorf("%s passes --%s, which `csi-node %s` does not define", name, flagName, c.Args[0])
			}
		}
	}
}

// definedFlags are the flag names one cmd source file defines.
func definedFlags(t *testing.T, elem ...string) map[string]bool {
	t.Helper()
	src := string(readFile(t, repoPath(elem...)))
	flags := map[string]bool{}
	for _, d := range regexp.MustCompile(`fs\.\w+\((?:&[\w.]+, )?"([a-z][a-z-]*)"`).FindAllStringSubmatch(src, -1) {
		flags[d[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("%s defines no flags: has it moved?", filepath.Join(elem...))
	}
	return flags
}

// normalised makes quantities comparable whatever their spelling.
func normalised(r corev1.ResourceRequirements) map[string]string {
	out := map[string]string{}
	for k, v := range r.Requests {
		out["requests."+string(k)] = v.String()
	}
	for k, v := range r.Limits {
		out["limits."+string(k)] = v.String()
	}
	return out
}

func checkDriversAndClasses(t *testing.T, objs []object, storageNS string) {
	t.Helper()
	drivers := map[string]storagev1.CSIDriver{}
	for _, o := range ofKind(objs, "CSIDriver") {
		var d storagev1.CSIDriver
		o.decode(t, &d)
		drivers[d.Name] = d
	}
	for _, name := range []string{localDriver, replicatedDriver} {
		d, ok := drivers[name]
		if !ok {
			t.Errorf("CSIDriver %s must be installed; got %v", name, ofKind(objs, "CSIDriver"))
			continue
		}
		if d.Spec.AttachRequired == nil || *d.Spec.AttachRequired || d.Spec.FSGroupPolicy == nil {
			t.Errorf("CSIDriver %s must say attachRequired: false and an fsGroupPolicy; got %+v", name, d.Spec)
		}
	}
	if len(drivers) != 2 {
		t.Errorf("exactly the two CSIDrivers must be installed; got %v", ofKind(objs, "CSIDriver"))
	}
	classes := map[string]storagev1.StorageClass{}
	for _, o := range ofKind(objs, "StorageClass") {
		var c storagev1.StorageClass
		o.decode(t, &c)
		classes[c.Name] = c
	}
	lc, rc := classes[localClass], classes[replicatedClass]
	if lc.Provisioner != localDriver || lc.VolumeBindingMode == nil || *lc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("StorageClass %s must provision with %s, WaitForFirstConsumer; got %+v", localClass, localDriver, lc)
	}
	if rc.Provisioner != replicatedDriver || rc.AllowVolumeExpansion == nil || !*rc.AllowVolumeExpansion {
		t.Errorf("StorageClass %s must provision with %s and allow expansion; got %+v", replicatedClass, replicatedDriver, rc)
	}
	wantParams := map[string]string{"replicas": "3", "backingStorageClassName": localClass,
		"csi.storage.k8s.io/node-stage-secret-name": "${pv.name}-mount", "csi.storage.k8s.io/node-stage-secret-namespace": storageNS}
	if !reflect.DeepEqual(rc.Parameters, wantParams) {
		t.Errorf("StorageClass %s parameters must be %v; got %v", replicatedClass, wantParams, rc.Parameters)
	}
}

func TestChartInstallsTheStorageHalf(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       []string
		storageNS string
	}{
		{name: "defaults", storageNS: storageNamespace},
		{name: "another storage namespace", set: []string{"--set", "storageNamespace=st"}, storageNS: "st"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, tc.set...)
			checkStorageHalf(t, objs, tc.storageNS)
			for _, o := range append(ofKind(objs, "DaemonSet"), ofKind(objs, "Deployment")...) {
				for _, want := range []string{"csiNode", "replicaHost", "csiProvisioner"} {
					if o.Kind == "DaemonSet" && !strings.Contains(string(o.raw), storageImage(want)+"@"+testDigest) {
						t.Errorf("the NODE DaemonSet must run %s by digest", storageImage(want))
					}
				}
				if o.Kind == "Deployment" && o.Name == storageControllerName && !strings.Contains(string(o.raw), storageImage("csiResizer")+"@"+testDigest) {
					t.Errorf("the storage controller Pod must run %s by digest", storageImage("csiResizer"))
				}
				if o.Kind == "Deployment" && o.Name == managerName && strings.Contains(string(o.raw), "registry.example.invalid/cellfleet/csi-") {
					t.Errorf("the fleet manager Pod must run no CSI sidecar")
				}
			}
			if ns := ofKind(objs, "Namespace"); !slices.ContainsFunc(ns, func(o object) bool { return o.Name == tc.storageNS }) {
				t.Errorf("the chart must create the storage namespace %s by default; got %v", tc.storageNS, ns)
			}
		})
	}
}

// kustomizeBuild renders one kustomization with the kustomize binary make
// builds.
func kustomizeBuild(t *testing.T, dir string) []object {
	t.Helper()
	if *kustomizeBin == "" {
		t.Fatal("chartcheck needs -kustomize=PATH to check config/: run it through make chart-check or make kustomize-check")
	}
	out, err := exec.Command(*kustomizeBin, "build", repoPath(dir)).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr)
	}
	objs, err := parseManifests(out)
	if err != nil {
		t.Fatalf("kustomize build %s rendered unparsable YAML: %v", dir, err)
	}
	return objs
}

var overlays = []string{"config/overlays/dev", "config/overlays/local", "config/overlays/production"}

// Every overlay installs the storage half like the chart, and its RBAC is
// exactly the role files, bound as the chart binds them.
func TestKustomizeOverlaysInstallTheStorageHalf(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			objs := kustomizeBuild(t, dir)
			checkStorageHalf(t, objs, storageNamespace)
			checkExactGrants(t, objs, wantGrants(t, release{[]string{"celld"}, storageNamespace}))
		})
	}
}
