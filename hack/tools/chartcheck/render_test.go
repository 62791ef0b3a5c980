package chartcheck

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var (
	helmBin = flag.String("helm", "", "helm binary to render the chart with (make chart-check builds bin/helm)")
	repoDir = flag.String("repo", "../../..", "root of the cellfleet checkout")

	kustomizeBin = flag.String("kustomize", "", "kustomize binary to build config/ with (make builds bin/kustomize)")
)

// The release every rendering uses; the expected object names follow from it.
const (
	releaseName      = "cellfleet"
	releaseNamespace = "cellfleet-system"
	managerName      = "cellfleet-manager"
	// The storage controller's Deployment and ServiceAccount
	// (docs/install.md, "Two Deployments").
	storageControllerName = "cellfleet-storage-controller"
	fleetName             = "cellfleet-fleet"
	nodeName              = "cellfleet-node"
	storageNamespace      = "cellfleet-storage"

	// Render for the Kubernetes version the project targets (the one envtest
	// runs), whatever default the helm binary was stamped with.
	kubeVersion = "v1.37.2"

	testRepository = "registry.example.invalid/cellfleet/manager"
	testDigest     = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *helmBin == "" && *kustomizeBin == "" {
		fmt.Fprintln(os.Stderr, "chartcheck needs -helm=PATH and/or -kustomize=PATH: run it through `make chart-check` or `make kustomize-check`, which build them")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// repoPath is a path inside the checkout.
func repoPath(elem ...string) string {
	return filepath.Join(append([]string{*repoDir}, elem...)...)
}

func chartDir() string { return repoPath("charts", "cellfleet") }

// runHelm runs helm with its config, cache and data homes in a temporary
// directory, so the check neither reads nor writes the user's helm state.
func runHelm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if *helmBin == "" {
		t.Fatal("this check renders the chart: it needs -helm=PATH (make chart-check)")
	}
	home := t.TempDir()
	cmd := exec.Command(*helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", *helmBin, err)
	}
	return out.String(), errOut.String(), err
}

// storageImageValues are the storage components' images (the chart has no
// default image): registry.example.invalid/cellfleet/<component>@testDigest.
var storageImageValues = func() []string {
	var v []string
	for _, c := range []string{"csiNode", "replicaHost", "csiProvisioner", "csiResizer"} {
		v = append(v, "--set", "storageImages."+c+".repository="+storageImage(c), "--set", "storageImages."+c+".digest="+testDigest)
	}
	return v
}()

// storageImage is the test repository of one storage component (a value key
// of storageImages).
func storageImage(component string) string {
	repo := map[string]string{"csiNode": "csi-node", "replicaHost": "replica-host", "csiProvisioner": "csi-provisioner", "csiResizer": "csi-resizer"}[component]
	return "registry.example.invalid/cellfleet/" + repo
}

// imageValues are the values every rendering needs: the chart has no default
// image.
var imageValues = append([]string{"--set", "image.repository=" + testRepository, "--set", "image.digest=" + testDigest}, storageImageValues...)

// bareTemplateArgs is `helm template` of the release with the storage images
// and the given extra flags (--set, ...), but no manager image.
func bareTemplateArgs(extra ...string) []string {
	args := []string{"template", releaseName, chartDir(), "--namespace", releaseNamespace, "--kube-version", kubeVersion}
	return append(append(args, storageImageValues...), extra...)
}

// templateArgs is bareTemplateArgs with the test manager image.
func templateArgs(extra ...string) []string {
	return bareTemplateArgs(append([]string{"--set", "image.repository=" + testRepository, "--set", "image.digest=" + testDigest}, extra...)...)
}

// object is one rendered manifest: its identity and its YAML.
type object struct {
	Kind      string
	Name      string
	Namespace string
	raw       []byte
}

func (o object) String() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// decode unmarshals the object's YAML into a typed API struct.
func (o object) decode(t *testing.T, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.raw, into); err != nil {
		t.Fatalf("decode %s: %v", o, err)
	}
}

// render runs helm template and fails the test if it does not render.
func render(t *testing.T, extra ...string) []object {
	t.Helper()
	out, errOut, err := runHelm(t, templateArgs(extra...)...)
	if err != nil {
		t.Fatalf("helm template %s must render, got %v:\n%s", strings.Join(extra, " "), err, errOut)
	}
	objs, err := parseManifests([]byte(out))
	if err != nil {
		t.Fatalf("helm template %s rendered unparsable YAML: %v", strings.Join(extra, " "), err)
	}
	return objs
}

// parseManifests splits a multi-document YAML stream into objects, skipping
// documents that hold only comments.
func parseManifests(stream []byte) ([]object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read document: %w", err)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %q: %w", doc, err)
		}
		if meta.Kind == "" {
			continue
		}
		objs = append(objs, object{Kind: meta.Kind, Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace, raw: doc})
	}
}

// ofKind returns the rendered objects of one kind.
func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// generatedObjects parses one of the repository's generated manifests.
func generatedObjects(t *testing.T, elem ...string) []object {
	t.Helper()
	data, err := os.ReadFile(repoPath(elem...))
	if err != nil {
		t.Fatalf("read generated manifest: %v", err)
	}
	objs, err := parseManifests(data)
	if err != nil {
		t.Fatalf("parse %s: %v", filepath.Join(elem...), err)
	}
	return objs
}
