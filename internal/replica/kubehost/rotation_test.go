package kubehost_test

// Certificates that rotate under writes, with real hosts
// (docs/volume-controller.md, "Certificate renewal"; docs/replica-engine.md,
// "Kubernetes mode"): the volume controller issues replica certificates
// that live 12 seconds and renews them at 8; the hosts read their Secrets
// every second and hand each running worker the new one. For four
// lifetimes a writer goes on through the real replica client while, every
// half second, a fresh TLS handshake with every worker and a write by a
// freshly dialled client must succeed: a worker still presenting a
// certificate past its life fails them. No host restarts, no worker is
// started twice, no write fails, and every acknowledged write reads back.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	rclient "github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// servedCertificate is the certificate a replica's worker presents to a
// new connection, verified against the volume's CA as a client verifies it.
func (fx *fixture) servedCertificate(ctx context.Context, vr storagev1alpha1.VolumeReplica) (*x509.Certificate, error) {
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Spec.VolumeName + "-mount"}, s); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.Data[storagev1alpha1.SecretKeyCACert])
	sl := &discoveryv1.EndpointSlice{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: fx.ns, Name: vr.Name}, sl); err != nil || len(sl.Endpoints) == 0 {
		return nil, fmt.Errorf("EndpointSlice of %s: %v", vr.Name, err)
	}
	addr := net.JoinHostPort(sl.Endpoints[0].Addresses[0], strconv.Itoa(int(vr.Spec.Port)))
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second}, Config: &tls.Config{RootCAs: roots,
		ServerName: vr.Name + "." + fx.ns + ".svc", NextProtos: []string{wire.ProtoRPC}, MinVersion: tls.VersionTLS13}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("handshake with %s at %s: %w", vr.Name, addr, err)
	}
	defer c.Close()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// freshWrite dials the volume anew and writes value at record k of ino.
func (fx *fixture) freshWrite(ctx context.Context, volumeName string, ino, k uint64) error {
	cfg, err := fx.clientConfig(volumeName)
	if err != nil {
		return err
	}
	c, err := rclient.Dial(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], k+1)
	if _, err := c.Write(ctx, ino, k*8, b[:]); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func TestCertificatesRotateUnderWritesWithoutARestartOrAFailedWrite(t *testing.T) {
	const validity = 12 * time.Second
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fx.ctx = ctx
	fx.CertificateValidity = validity
	rv, led := fx.healthyUnderWrites(ctx, "kh-rot", "khrot", hosts, "-secret-refresh", "1s")
	c := fx.dial(ctx, rv.Name)
	fresh, err := c.Create(ctx, rclient.RootIno, "fresh", 0o644, 0, 0)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}

	served := map[string]map[string]bool{} // replica -> serial numbers it presented
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var k uint64
	start := time.Now()
	for end := start.Add(4 * validity); time.Now().Before(end); k++ {
		for _, vr := range fx.replicas(rv.Name) {
			cert, err := fx.servedCertificate(ctx, vr)
			if err != nil {
				t.Fatalf("%s into the rotation a new connection to %s failed: the worker must present its renewed certificate: %v",
					time.Since(start).Round(time.Second), vr.Name, err)
			}
			if served[vr.Name] == nil {
				served[vr.Name] = map[string]bool{}
			}
			served[vr.Name][cert.SerialNumber.String()] = true
		}
		if err := fx.freshWrite(ctx, rv.Name, fresh.Ino, k); err != nil {
			t.Fatalf("a freshly dialled client's write %d failed: %v", k, err)
		}
		<-tick.C
	}

	for name, serials := range served {
		if len(serials) < 3 {
			t.Errorf("replica %s presented %d certificates in four lifetimes, want at least 3: it was not renewed in place", name, len(serials))
		}
	}
	for _, n := range fx.Nodes {
		if err := n.Proc.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("the host of %s is gone: %v", n.Name, err)
		}
		log := hostLog(t, fx, n.Name)
		if got := bytes.Count(log, []byte(`"worker admitted"`)); got != 1 {
			t.Errorf("the host of %s admitted its worker %d times, want once: no restart", n.Name, got)
		}
		if !bytes.Contains(log, []byte("worker credentials reloaded")) {
			t.Errorf("the host of %s never reloaded its worker's credentials", n.Name)
		}
	}
	if f := led.failures.Load(); f != 0 {
		t.Errorf("%d of the writer's dials or writes failed during the rotation, want none", f)
	}
	led.verify(ctx)
	c = fx.dial(ctx, rv.Name)
	defer c.Close()
	for i := range k {
		got, err := c.Read(ctx, fresh.Ino, i*8, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 8 || binary.LittleEndian.Uint64(got) != i+1 {
			t.Fatalf("fresh write %d: read %x, acknowledged value %d lost", i, got, i+1)
		}
	}
	t.Logf("%d fresh writes and handshake rounds; certificates presented per replica: %v", k, countEach(served))
}

func countEach(m map[string]map[string]bool) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}
