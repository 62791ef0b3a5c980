package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/testenv"
)

// TestManagerServesTheCSIControllerOnItsSocket runs the real manager
// binary (this test binary re-executed as main) against a real API server
// with --controllers=storage --csi-controller-socket, and talks to it as
// csi-provisioner does.
func TestManagerServesTheCSIControllerOnItsSocket(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kubeconfig, env)
	socket := filepath.Join(dir, "csi", "csi.sock")

	// That test's child branch runs main with CELLFLEET_MANAGER_ARGS.
	cmd := exec.Command(os.Args[0], "-test.run=^TestProcessExitsWhenReplacementDelayTooShort$")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "CELLFLEET_MANAGER_ARGS=--controllers=storage --csi-controller-socket=unix://"+socket+
		" --metrics-bind-address=0 --health-probe-bind-address=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("the manager did not stop within 20s of SIGTERM; stderr:\n%s", stderr.String())
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != replicated.DriverName {
		t.Fatalf("the manager must serve the %s identity on --csi-controller-socket, got %v (%v); stderr:\n%s",
			replicated.DriverName, info, err, stderr.String())
	}
	caps, err := csi.NewControllerClient(conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil || !strings.Contains(caps.String(), "CREATE_DELETE_VOLUME") || !strings.Contains(caps.String(), "EXPAND_VOLUME") {
		t.Fatalf("the manager's CSI controller must offer create/delete and expansion, got %v (%v)", caps, err)
	}
	// An answer that needs the API: the backing class is looked up there.
	_, err = csi.NewControllerClient(conn).CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
		Parameters: map[string]string{"backingStorageClassName": "absent", "csi.storage.k8s.io/pvc/name": "data",
			"csi.storage.k8s.io/pvc/namespace": "app"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `backing StorageClass "absent"`) {
		t.Fatalf("CreateVolume through the manager must read the API and refuse the missing backing class, got %v", err)
	}
}

// writeKubeconfig writes a kubeconfig for the envtest API server.
func writeKubeconfig(t *testing.T, path string, env *testenv.Env) {
	t.Helper()
	c := env.Config
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
}
