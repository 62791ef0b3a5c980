// Command provisioner provisions dynamic "local" PersistentVolumes for the
// single-host multi-node test cluster: a claim of a WaitForFirstConsumer class
// gets a directory under <base>/<node>/pv/<pv-name> and a Local PV pinned to
// the node the scheduler selected, so a member's disk follows the node like a
// zonal disk would. It is test infrastructure, its own module (GOWORK=off),
// and must never be imported by the project.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// provisionerName is the StorageClass provisioner cluster-up.sh registers.
const provisionerName = "cellfleet.local/hostpath"

// hostPath provisions directories below base.
type hostPath struct{ base string }

func (p *hostPath) dir(node, pv string) string { return filepath.Join(p.base, node, "pv", pv) }

// Provision creates the volume's directory on the selected node. Without a
// selected node there is no place to put it: the class must bind late.
func (p *hostPath) Provision(_ context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	if o.SelectedNodeName == "" {
		return nil, controller.ProvisioningFinished, errors.New("no selected node: the StorageClass needs volumeBindingMode WaitForFirstConsumer")
	}
	dir := p.dir(o.SelectedNodeName, o.PVName)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("create volume directory %s: %w", dir, err)
	}
	// Pods run as arbitrary users; MkdirAll's mode is filtered by the umask.
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("open volume directory %s to every user: %w", dir, err)
	}
	slog.Info("provisioned", "pv", o.PVName, "claim", o.PVC.Namespace+"/"+o.PVC.Name, "node", o.SelectedNodeName)
	reclaim := v1.PersistentVolumeReclaimDelete
	if o.StorageClass.ReclaimPolicy != nil {
		reclaim = *o.StorageClass.ReclaimPolicy
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			AccessModes:                   o.PVC.Spec.AccessModes,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: o.PVC.Spec.Resources.Requests[v1.ResourceStorage]},
			PersistentVolumeSource:        v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{
					Key: v1.LabelHostname, Operator: v1.NodeSelectorOpIn, Values: []string{o.SelectedNodeName},
				}},
			}}}},
		},
	}, controller.ProvisioningFinished, nil
}

// Delete removes the volume's directory when its PV is released.
func (p *hostPath) Delete(_ context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.Local == nil {
		return nil
	}
	if err := os.RemoveAll(pv.Spec.Local.Path); err != nil {
		return fmt.Errorf("remove volume directory of %s: %w", pv.Name, err)
	}
	slog.Info("deleted", "pv", pv.Name)
	return nil
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (required)")
	base := flag.String("base", "", "directory holding one sub-directory per node (required)")
	flag.Parse()
	if *kubeconfig == "" || *base == "" {
		fmt.Fprintln(os.Stderr, "provisioner: --kubeconfig and --base are required")
		os.Exit(2)
	}
	if err := run(*kubeconfig, *base); err != nil {
		slog.Error("provisioner stopped", "err", err)
		os.Exit(1)
	}
}

func run(kubeconfig, base string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	controller.NewProvisionController(ctx, c, provisionerName, &hostPath{base: base},
		controller.LeaderElection(false)).Run(ctx)
	return nil
}
