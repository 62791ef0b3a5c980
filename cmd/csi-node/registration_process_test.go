package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerv1 "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cellfleet/cellfleet/internal/csi/local"
	"github.com/cellfleet/cellfleet/internal/csi/replicated"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// kubelet plays the kubelet's plugin watcher against a registration socket:
// the calls the kubelet makes, in its order.
type kubelet struct {
	t    *testing.T
	conn *grpc.ClientConn
}

func dialRegistration(t *testing.T, socket string) *kubelet {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &kubelet{t: t, conn: conn}
}

func (k *kubelet) getInfo() *registerv1.PluginInfo {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := registerv1.NewRegistrationClient(k.conn).GetInfo(ctx, &registerv1.InfoRequest{})
	if err != nil {
		k.t.Fatalf("GetInfo: %v", err)
	}
	return info
}

func (k *kubelet) notify(registered bool, reason string) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := registerv1.NewRegistrationClient(k.conn).NotifyRegistrationStatus(ctx,
		&registerv1.RegistrationStatus{PluginRegistered: registered, Error: reason}); err != nil {
		k.t.Fatalf("NotifyRegistrationStatus(%v): %v", registered, err)
	}
}

func inode(path string) (uint64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Sys().(*syscall.Stat_t).Ino, nil
}

// TestKubeletRegistersTheDriver runs the real csi-node plugin of each driver
// with --plugin-registration-dir and does what the kubelet does: finds
// <driver>-reg.sock, asks GetInfo (a CSIPlugin of that name, the endpoint
// to dial, CSI 1.0.0), dials that endpoint for NodeGetInfo, and reports the
// verdict. A refusal makes the plugin remove the socket and create a new one
// (the kubelet's watcher registers each new socket); SIGTERM removes it, so
// the kubelet deregisters the driver.
func TestKubeletRegistersTheDriver(t *testing.T) {
	for _, driver := range []string{local.DriverName, replicated.DriverName} {
		t.Run(driver, func(t *testing.T) {
			// Not t.TempDir: a unix socket path must stay under 108 bytes.
			base, err := os.MkdirTemp("", "reg")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(base) })
			socket, regDir := filepath.Join(base, "csi.sock"), filepath.Join(base, "plugins_registry")
			args := []string{"--driver=" + driver, "--state-dir=" + filepath.Join(base, "state"),
				"--kubelet-dir=" + filepath.Join(base, "kubelet"), "--plugin-registration-dir=" + regDir,
				// The kubelet dials the path it is told; here that is the plugin's own socket.
				"--kubelet-registration-path=" + socket}
			if driver == local.DriverName {
				args = append(args, "--data-root="+filepath.Join(base, "data"))
			} else {
				args = append(args, "--mount-owner-socket="+filepath.Join(base, "owner.sock"))
			}
			plugin, _ := startPlugin(t, socket, args...)
			regSocket := filepath.Join(regDir, driver+"-reg.sock")
			poll.UntilTrue(t, 30*time.Second, "the registration socket appears", func() bool {
				_, err := os.Stat(regSocket)
				return err == nil
			})
			st, err := os.Stat(regSocket)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
				t.Fatalf("%s is %v, want a socket only root may use (0600)", regSocket, st.Mode())
			}

			k := dialRegistration(t, regSocket)
			info := k.getInfo()
			if info.Type != registerv1.CSIPlugin || info.Name != driver || info.Endpoint != socket ||
				!slices.Contains(info.SupportedVersions, "1.0.0") {
				t.Fatalf("GetInfo = %+v, want type %s, name %s, endpoint %s, versions with 1.0.0", info, registerv1.CSIPlugin, driver, socket)
			}
			// The kubelet's CSI handler asks the endpoint for the node's ID.
			csiConn, err := grpc.NewClient("unix://"+info.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer csiConn.Close()
			node, err := csi.NewNodeClient(csiConn).NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
			if err != nil || node.NodeId != "node-a" {
				t.Fatalf("NodeGetInfo on the announced endpoint = %v, %v; want node-a", node, err)
			}
			k.notify(true, "")
			poll.UntilTrue(t, 10*time.Second, "the plugin logs the registration", func() bool {
				return strings.Contains(plugin.out.String(), "registered with the kubelet")
			})

			// Hold the refused socket's inode open: once the plugin removes
			// it, the file system may hand its number to the new socket,
			// and a held inode cannot be handed out again.
			pin, err := unix.Open(regSocket, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(pin)
			var pinned unix.Stat_t
			if err := unix.Fstat(pin, &pinned); err != nil {
				t.Fatal(err)
			}
			first := pinned.Ino
			k.notify(false, "driver name already registered by another plugin")
			poll.UntilTrue(t, 30*time.Second, "a new registration socket replaces the refused one", func() bool {
				ino, err := inode(regSocket)
				return err == nil && ino != first
			})
			if !strings.Contains(plugin.out.String(), "driver name already registered by another plugin") {
				t.Fatalf("the plugin did not log the kubelet's refusal:\n%s", plugin.out)
			}
			if info := dialRegistration(t, regSocket).getInfo(); info.Name != driver {
				t.Fatalf("GetInfo on the new socket names %q", info.Name)
			}

			if err := plugin.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-plugin.exited:
				if err != nil {
					t.Fatalf("plugin exited with %v after SIGTERM:\n%s", err, plugin.out)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("plugin did not exit within 30s of SIGTERM")
			}
			if _, err := os.Stat(regSocket); !os.IsNotExist(err) {
				t.Fatalf("registration socket still there after SIGTERM (%v): the kubelet would keep the driver registered", err)
			}
		})
	}
}
