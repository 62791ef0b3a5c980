package chartcheck

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// access is one request one of cellfleet's ServiceAccounts makes (or must
// never be able to make), asked of the API server's RBAC authorizer.
type access struct {
	verb, group, resource, namespace string
	allowed                          bool
	why                              string
}

// Installs the chart with helm on a real kube-apiserver (envtest, RBAC
// authorization) and asks the authorizer what the fleet manager's, the
// storage controller's and the NODE ServiceAccounts may do: the objects must
// be accepted as valid (the API server validates the DaemonSet's propagation
// against privilege, the CSIDrivers and StorageClasses), and the fleet
// manager's permissions must be exactly the fleet operator's as
// docs/fleet-operator.md ("Deployment notes") describes them, in every fleet
// namespace and nowhere else, the storage half's the storage controller's.
func TestChartInstallsOnARealAPIServerWithTheFleetPermissions(t *testing.T) {
	_, kubeconfigPath, clientset := startAPIServer(t)
	ctx := t.Context()

	install := []string{"install", releaseName, chartDir(), "--kubeconfig", kubeconfigPath,
		"--namespace", releaseNamespace, "--create-namespace",
		"--set", "createFleetNamespaces=true", "--set", "fleetNamespaces={celld,b}"}
	if out, errOut, err := runHelm(t, append(install, imageValues...)...); err != nil {
		t.Fatalf("helm install must succeed on a real API server: %v\n%s%s", err, out, errOut)
	}

	t.Run("CRDs are served", func(t *testing.T) {
		for gv, resources := range map[string][]string{
			"celld.eric.dev/v1alpha1":   {"celldfleets", "celldstoragereservations"},
			"storage.eric.dev/v1alpha1": {"replicatedvolumes", "volumereplicas"},
		} {
			var served []string
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				list, err := clientset.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil // not yet established
				}
				served = served[:0]
				for _, r := range list.APIResources {
					served = append(served, r.Name)
				}
				return !slices.ContainsFunc(resources, func(r string) bool { return !slices.Contains(served, r) }), nil
			})
			if err != nil {
				t.Errorf("the chart's CRDs must serve %v in %s; served %v", resources, gv, served)
			}
		}
	})

	// What each ServiceAccount may do (identities_test.go; docs/install.md,
	// "Two Deployments"), in both fleet namespaces.
	t.Run("permissions of each ServiceAccount", func(t *testing.T) {
		checkIdentities(t, clientset, release{[]string{"celld", "b"}, storageNamespace})
	})

	t.Run("storage objects are accepted", func(t *testing.T) {
		if _, err := clientset.AppsV1().DaemonSets(storageNamespace).Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
			t.Errorf("the NODE DaemonSet must be installed in %s: %v", storageNamespace, err)
		}
		for _, suffix := range nodePolicies {
			name := releaseName + suffix
			if _, err := clientset.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("the NODE policy %s must be installed: %v", name, err)
			}
			if _, err := clientset.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("the NODE policy binding %s must be installed: %v", name, err)
			}
		}
		for _, name := range []string{localDriver, replicatedDriver} {
			if _, err := clientset.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("CSIDriver %s must be installed: %v", name, err)
			}
		}
		for _, name := range []string{localClass, replicatedClass} {
			if _, err := clientset.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("StorageClass %s must be installed: %v", name, err)
			}
		}
	})

	t.Run("a delay below one minute is refused and changes nothing", func(t *testing.T) {
		upgrade := append([]string{"upgrade", releaseName, chartDir(), "--kubeconfig", kubeconfigPath,
			"--namespace", releaseNamespace, "--reuse-values", "--set", "memberReplacementDelay=30s"}, imageValues...)
		_, errOut, err := runHelm(t, upgrade...)
		if err == nil || !strings.Contains(errOut, "memberReplacementDelay=30s is below the minimum of 1m") {
			t.Fatalf("helm upgrade to memberReplacementDelay=30s must be refused with the minimum in the message; err %v, helm said:\n%s", err, errOut)
		}
		d, err := clientset.AppsV1().Deployments(releaseNamespace).Get(ctx, managerName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the manager Deployment: %v", err)
		}
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--member-replacement-delay=10m") {
			t.Errorf("a refused upgrade must leave the manager at --member-replacement-delay=10m; args %v", args)
		}
	})

	t.Run("uninstall keeps the fleet namespaces", func(t *testing.T) {
		if out, errOut, err := runHelm(t, "uninstall", releaseName, "--kubeconfig", kubeconfigPath, "--namespace", releaseNamespace); err != nil {
			t.Fatalf("helm uninstall: %v\n%s%s", err, out, errOut)
		}
		for _, name := range []string{"celld", "b", storageNamespace} {
			ns, err := clientset.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get namespace %s: %v", name, err)
			}
			if ns.DeletionTimestamp != nil {
				t.Errorf("uninstalling the chart must never delete namespace %s, which holds fleets or backing claims and their disks", name)
			}
		}
	})
}

// checkAccess asks the API server's RBAC authorizer what one ServiceAccount
// may do.
func checkAccess(t *testing.T, clientset kubernetes.Interface, who, namespace, name string, cases []access) {
	t.Helper()
	for _, c := range cases {
		// "serviceaccounts/token" names a subresource.
		resource, subresource, _ := strings.Cut(c.resource, "/")
		review, err := clientset.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:" + namespace + ":" + name,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: c.verb, Group: c.group, Resource: resource, Subresource: subresource, Namespace: c.namespace,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview: %v", err)
		}
		if review.Status.Allowed != c.allowed {
			must := "must"
			if !c.allowed {
				must = "must not"
			}
			resource := c.resource
			if c.group != "" {
				resource += "." + c.group
			}
			t.Errorf("the %s %s be able to %s %s in namespace %q (%s)", who, must, c.verb, resource, c.namespace, c.why)
		}
	}
}

// startAPIServer starts a real kube-apiserver and etcd (envtest, RBAC
// authorization) for one test and returns its admin config, a kubeconfig file
// of an installing admin user, and a client.
func startAPIServer(t *testing.T) (*rest.Config, string, *kubernetes.Clientset) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS must name the kube-apiserver and etcd built by hack/envtest-assets.sh: run make chart-check or make kustomize-check")
	}
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop the API server: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "chartcheck-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("add the installing user: %v", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatalf("kubeconfig of the installing user: %v", err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return cfg, kubeconfigPath, clientset
}
