package e2e

// The controllers under qualification: the two Deployments of
// config/overlays/local (docs/install.md, "Two Deployments"), running in the
// cluster from the image `make images` built: the fleet manager
// (--controllers=fleet, --member-replacement-delay=1m so the replacement
// scenarios fit in a suite) and the storage controller (--controllers=storage
// with the CSI sidecars, --replica-replacement-delay=1m).

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cellfleet/cellfleet/test/e2e/cluster"
)

// The two Deployments in managerNamespace, and the value of their Pods'
// app.kubernetes.io/component label.
const (
	managerNamespace            = "cellfleet-system"
	managerDeployment           = "cellfleet-manager"
	storageControllerDeployment = "cellfleet-storage-controller"

	managerComponent           = "manager"
	storageControllerComponent = "storage-controller"
)

// deployManager applies the rendered manifest (when given) and waits until
// both Deployments, the fleet manager and the storage controller, are
// available.
func deployManager(ctx context.Context, c *cluster.Cluster, manifest string) error {
	if manifest != "" {
		if _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", manifest); err != nil {
			return fmt.Errorf("apply the manager manifest: %w", err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, name := range []string{managerDeployment, storageControllerDeployment} {
		if err := waitDeploymentAvailable(ctx, c, name, deadline); err != nil {
			return err
		}
	}
	return nil
}

// waitDeploymentAvailable waits until the Deployment of managerNamespace has
// rolled out and has an available replica.
func waitDeploymentAvailable(ctx context.Context, c *cluster.Cluster, name string, deadline time.Time) error {
	for {
		d := &appsv1.Deployment{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: name}, d)
		if err == nil && d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= 1 &&
			d.Status.UpdatedReplicas == d.Status.Replicas {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Deployment %s/%s not available within 3m (err %v, status %+v)", managerNamespace, name, err, d.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// managerPod is the running fleet manager Pod.
func managerPod(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	return componentPod(ctx, t, managerComponent)
}

// storageControllerPod is the running storage controller Pod.
func storageControllerPod(ctx context.Context, t *testing.T) *corev1.Pod {
	t.Helper()
	return componentPod(ctx, t, storageControllerComponent)
}

// componentPod is a running Pod of managerNamespace with the component label.
func componentPod(ctx context.Context, t *testing.T, component string) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(managerNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": component}); err != nil {
		t.Fatalf("list %s Pods: %v", component, err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no %s Pod runs", component)
	return nil
}

// The containers whose restarts the scenarios count: the manager binary's in
// either Deployment (the storage controller's Pod also runs the CSI
// sidecars) and a member's (internal/controller/fleet renders it as
// "celld").
const (
	managerContainer = "manager"
	memberContainer  = "celld"
)

// restartCount is a container's restart count, found by name: kubelet
// reports a Pod's container statuses sorted by name, not in spec order.
func restartCount(p *corev1.Pod, container string) int32 {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			return c.RestartCount
		}
	}
	return 0
}

// killOperator kill -9s the fleet manager's process (no graceful hand-off
// of its lease or its work) and waits until its container is back and Ready.
func killOperator(ctx context.Context, t *testing.T) {
	t.Helper()
	killManagerProcess(ctx, t, managerPod(ctx, t), "the operator")
}

// killStorageController kill -9s the storage controller's manager process
// (the volume controller and the CSI controller; its sidecars keep running)
// and waits until its container is back and Ready.
func killStorageController(ctx context.Context, t *testing.T) {
	t.Helper()
	killManagerProcess(ctx, t, storageControllerPod(ctx, t), "the storage controller")
}

func killManagerProcess(ctx context.Context, t *testing.T, p *corev1.Pod, what string) {
	t.Helper()
	before := restartCount(p, managerContainer)
	if err := cluster.KillContainerProcess(p.UID, managerContainer); err != nil {
		t.Fatalf("kill -9 %s: %v", what, err)
	}
	waitFor(ctx, t, 2*time.Minute, func() bool {
		q := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), q); err != nil {
			return false
		}
		return restartCount(q, managerContainer) > before && podReady(q)
	}, func() string { return what + "'s manager container restarts after kill -9 and turns Ready" })
}

// writeSummary renders docs/qualification.md's table from the scenarios run.
// A run restricted by -run (E2E_RUN) says so: its table is not the full list.
func writeSummary(path string, took time.Duration) error {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var b strings.Builder
	passed := 0
	for _, r := range results {
		if r.Passed {
			passed++
		}
	}
	scope := "every scenario"
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		scope = fmt.Sprintf("the scenarios matching `E2E_RUN='%s'`", f.Value.String())
	}
	where := "the local multi-node cluster"
	if !env.Local {
		where = "the cluster of " + cluster.EnvKubeconfig
	}
	fmt.Fprintf(&b, "# Qualification on %s\n\n", where)
	fmt.Fprintf(&b, "Generated by `make e2e` on %s (%s in one run of %s): %d of %d scenarios passed. "+
		"Each scenario starts from a clean fleet "+
		"under continuous write load through the fleet's Service; *verified* counts acknowledged writes read back "+
		"afterwards (every one must be); *operator deletions* are every delete the operator's "+
		"ServiceAccount made during the scenario, from the API server's audit log. See docs/local-cluster.md.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), scope, took.Round(time.Second), passed, len(results))
	b.WriteString("| scenario | result | duration | writes acknowledged | writes verified | operator deletions |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		status := "pass"
		if !r.Passed {
			status = "FAIL: " + r.FailReason
		}
		dels := "none"
		if len(r.Deletions) > 0 {
			dels = strings.Join(r.Deletions, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %s |\n", r.Scenario, status, r.Duration, r.Acked, r.Verified, dels)
	}
	writeStorageSummary(&b)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
