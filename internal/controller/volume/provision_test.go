package volume_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/controller/volume"
)

// A volume on a three-node cluster gets, per replica, a VolumeReplica on a
// distinct node, a Secret signed by the volume's own CA for its Service's
// DNS name, a backing claim bound to that node and a selectorless Service
// on its port; the CA key stays in the manager's namespace.
func TestProvisionOnThreeEligibleNodes(t *testing.T) {
	fx := newFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		fx.node(n, "", true)
	}
	rv := fx.volume(3)
	fx.converge(rv.Name)

	got := fx.get(rv.Name)
	if c := condition(got, storagev1alpha1.VolumePlaced); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Placed = %+v, want True", c)
	}
	if c := condition(got, storagev1alpha1.VolumeReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready = %+v, want False before any host reports a coordinator", c)
	}
	caSecret, ok := fx.secret(fx.managerNS, "rv-"+rv.Name+"-ca")
	if !ok || len(caSecret.Data[storagev1alpha1.SecretKeyCAKey]) == 0 {
		t.Fatalf("the CA secret in the manager namespace %s is missing or has no key", fx.managerNS)
	}
	caBlock, _ := pem.Decode(caSecret.Data[storagev1alpha1.SecretKeyCACert])
	caCert, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)

	vrs := fx.replicas(rv.Name)
	if len(vrs) != 3 {
		t.Fatalf("%d VolumeReplicas, want 3", len(vrs))
	}
	nodes := map[string]bool{}
	claims := map[string]corev1.PersistentVolumeClaim{}
	for _, c := range fx.claims(rv.Name) {
		claims[c.Name] = c
	}
	services := map[string]corev1.Service{}
	for _, s := range fx.services(rv.Name) {
		services[s.Name] = s
	}
	for i := 0; i < 3; i++ {
		name := volume.ReplicaName(rv.Name, i)
		var vr *storagev1alpha1.VolumeReplica
		for j := range vrs {
			if vrs[j].Name == name {
				vr = &vrs[j]
			}
		}
		if vr == nil {
			t.Fatalf("no VolumeReplica %s", name)
		}
		nodes[vr.Spec.Node] = true
		if vr.Spec.Generation != 1 || vr.Spec.BackingClaimName != name || vr.Spec.VolumeName != rv.Name {
			t.Errorf("replica %s spec = %+v, want generation 1, claim %s, volume %s", name, vr.Spec, name, rv.Name)
		}
		if len(vr.Spec.Peers) != 2 {
			t.Errorf("replica %s lists %d peers, want the 2 others", name, len(vr.Spec.Peers))
		}
		for _, p := range vr.Spec.Peers {
			if p.Address != p.Name+"."+fx.ns+".svc" || p.Name == name {
				t.Errorf("replica %s peer %+v: want another replica at its Service DNS name", name, p)
			}
		}
		claim, ok := claims[name]
		if !ok {
			t.Fatalf("no backing claim %s", name)
		}
		if claim.Annotations[storagev1alpha1.AnnotationSelectedNode] != vr.Spec.Node {
			t.Errorf("claim %s selected-node = %q, want its replica's node %q", name, claim.Annotations[storagev1alpha1.AnnotationSelectedNode], vr.Spec.Node)
		}
		if *claim.Spec.StorageClassName != backingClass || claim.Spec.Resources.Requests.Storage().Cmp(rv.Spec.Capacity) != 0 {
			t.Errorf("claim %s: class %s, request %s; want %s, %s", name, *claim.Spec.StorageClassName,
				claim.Spec.Resources.Requests.Storage(), backingClass, rv.Spec.Capacity.String())
		}
		svc, ok := services[name]
		if !ok {
			t.Fatalf("no replica Service %s", name)
		}
		if len(svc.Spec.Selector) != 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != vr.Spec.Port {
			t.Errorf("service %s = %+v, want selectorless with the replica's port %d", name, svc.Spec, vr.Spec.Port)
		}
		sec, ok := fx.secret(fx.ns, name+"-tls")
		if !ok {
			t.Fatalf("no replica secret %s-tls", name)
		}
		if _, leaked := sec.Data[storagev1alpha1.SecretKeyCAKey]; leaked {
			t.Errorf("replica secret %s carries the CA key: it must stay in the manager's namespace", sec.Name)
		}
		if sec.Labels[storagev1alpha1.LabelNode] != vr.Spec.Node {
			t.Errorf("replica secret %s node label %q, want %q", sec.Name, sec.Labels[storagev1alpha1.LabelNode], vr.Spec.Node)
		}
		block, _ := pem.Decode(sec.Data[storagev1alpha1.SecretKeyCert])
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		dns := name + "." + fx.ns + ".svc"
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: dns, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("replica %s certificate does not verify for %s against the volume's CA: %v", name, dns, err)
		}
		if string(sec.Data[storagev1alpha1.SecretKeyPeerToken]) != string(caSecret.Data[storagev1alpha1.SecretKeyPeerToken]) {
			t.Errorf("replica %s peer token differs from the volume's", name)
		}
	}
	if len(nodes) != 3 {
		t.Errorf("replicas on %d distinct nodes, want 3", len(nodes))
	}
	mount, ok := fx.secret(fx.ns, rv.Name+"-mount")
	if !ok {
		t.Fatal("no mount secret")
	}
	if len(mount.Data) != 2 || len(mount.Data[storagev1alpha1.SecretKeyMountToken]) == 0 || len(mount.Data[storagev1alpha1.SecretKeyCACert]) == 0 {
		t.Errorf("mount secret keys = %v, want exactly ca.crt and mount-token", keys(mount.Data))
	}

	// A second volume gets its own CA: there is no shared CA.
	rv2 := fx.volume(3)
	fx.converge(rv2.Name)
	ca2, _ := fx.secret(fx.managerNS, "rv-"+rv2.Name+"-ca")
	if string(ca2.Data[storagev1alpha1.SecretKeyCACert]) == string(caSecret.Data[storagev1alpha1.SecretKeyCACert]) {
		t.Error("two volumes share one CA")
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Two eligible nodes for three replicas: Placed=False, reason Pending, the
// message naming how many are eligible and which requirement the third node
// fails; nothing is created until a third node is eligible.
func TestTooFewEligibleNodesIsPendingAndSaysWhy(t *testing.T) {
	fx := newFixture(t)
	fx.node("a", "", true)
	fx.node("b", "", true)
	c := fx.node("c", "", false)
	rv := fx.volume(3)
	fx.converge(rv.Name)

	got := fx.get(rv.Name)
	cond := condition(got, storagev1alpha1.VolumePlaced)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != storagev1alpha1.ReasonPending.String() {
		t.Fatalf("Placed = %+v, want False with reason Pending", cond)
	}
	for _, want := range []string{"2 of the 3 distinct nodes the volume needs are eligible", "3 nodes, 3 of them labelled " + volume.LocalStorageLabel,
		"1 without a ready replica-host container (" + c + ")"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("Placed message %q does not say %q", cond.Message, want)
		}
	}
	if n := len(fx.replicas(rv.Name)); n != 0 {
		t.Fatalf("%d VolumeReplicas created with too few nodes, want none (never fewer replicas than requested)", n)
	}

	fx.setHostReady(c, true)
	fx.converge(rv.Name)
	if cond := condition(fx.get(rv.Name), storagev1alpha1.VolumePlaced); cond.Status != metav1.ConditionTrue {
		t.Fatalf("after the third host became ready Placed = %+v, want True", cond)
	}
}

// With nodes in three zones, two each, three replicas land in three zones
// (name order alone would put two in zone a).
func TestReplicasSpreadAcrossZones(t *testing.T) {
	fx := newFixture(t)
	zoneOf := map[string]string{}
	for _, z := range []string{"a", "b", "c"} {
		for i := 1; i <= 2; i++ {
			zoneOf[fx.node(fmt.Sprintf("%s%d", z, i), "zone-"+z, true)] = "zone-" + z
		}
	}
	rv := fx.volume(3)
	fx.converge(rv.Name)
	zones := map[string]bool{}
	for _, vr := range fx.replicas(rv.Name) {
		zones[zoneOf[vr.Spec.Node]] = true
	}
	if len(zones) != 3 {
		t.Fatalf("replicas in zones %v, want three distinct zones", zones)
	}
}

// Many volumes reconciled at once on three nodes: no node ever has one port
// for two replicas.
func TestPortsAreNeverSharedOnANode(t *testing.T) {
	fx := newFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		fx.node(n, "", true)
	}
	const volumes = 16
	var names []string
	for i := 0; i < volumes; i++ {
		names = append(names, fx.volume(3).Name)
	}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < 5; round++ {
				_, _ = fx.reconcile(name)
			}
		}()
	}
	wg.Wait()
	byNode := map[string]map[int32]string{}
	total := 0
	for _, name := range names {
		for _, vr := range fx.replicas(name) {
			total++
			if byNode[vr.Spec.Node] == nil {
				byNode[vr.Spec.Node] = map[int32]string{}
			}
			if other, dup := byNode[vr.Spec.Node][vr.Spec.Port]; dup {
				t.Errorf("node %s: port %d handed to %s and %s", vr.Spec.Node, vr.Spec.Port, other, vr.Name)
			}
			byNode[vr.Spec.Node][vr.Spec.Port] = vr.Name
		}
	}
	if total != 3*volumes {
		t.Fatalf("%d replicas, want %d", total, 3*volumes)
	}
}

// A manager that stops after any one of its provisioning writes, and is
// replaced by a new one, converges to exactly the specified objects: no
// duplicate replica, claim, Service or port, and no replica moved.
func TestRestartMidProvisionConvergesWithoutDuplicates(t *testing.T) {
	fx := newFixture(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		fx.node(n, "", true)
	}
	for stopAfter := 1; stopAfter <= 12; stopAfter++ {
		t.Run(fmt.Sprintf("stop after write %d", stopAfter), func(t *testing.T) {
			rv := fx.volume(3)
			writes := 0
			fx.rec.inject = func(w write) bool { writes++; return writes > stopAfter }
			_, _ = fx.reconcile(rv.Name)
			fx.rec.inject = nil
			before := map[string]string{}
			for _, vr := range fx.replicas(rv.Name) {
				before[vr.Name] = vr.Spec.Node
			}
			// Another volume placed while the manager was down takes nodes
			// and ports the interrupted placement had in mind.
			fx.restart()
			fx.converge(fx.volume(3).Name)
			fx.converge(rv.Name)
			vrs := fx.replicas(rv.Name)
			portOf := map[string]int32{}
			for _, vr := range vrs {
				portOf[vr.Name] = vr.Spec.Port
			}
			if len(vrs) != 3 || len(fx.claims(rv.Name)) != 3 || len(fx.services(rv.Name)) != 3 {
				t.Fatalf("%d replicas, %d claims, %d services; want 3 each", len(vrs), len(fx.claims(rv.Name)), len(fx.services(rv.Name)))
			}
			for _, vr := range vrs {
				if n, ok := before[vr.Name]; ok && n != vr.Spec.Node {
					t.Errorf("replica %s moved from %s to %s across the restart", vr.Name, n, vr.Spec.Node)
				}
				if len(vr.Spec.Peers) != 2 {
					t.Errorf("replica %s lists %d peers after the restart, want 2", vr.Name, len(vr.Spec.Peers))
				}
				for _, p := range vr.Spec.Peers {
					if p.Port != portOf[p.Name] {
						t.Errorf("replica %s lists peer %s at port %d, the peer listens on %d", vr.Name, p.Name, p.Port, portOf[p.Name])
					}
				}
				svc := fx.services(rv.Name)
				for _, s := range svc {
					if s.Name == vr.Name && s.Spec.Ports[0].Port != vr.Spec.Port {
						t.Errorf("service %s port %d, replica port %d", s.Name, s.Spec.Ports[0].Port, vr.Spec.Port)
					}
				}
			}
			if c := condition(fx.get(rv.Name), storagev1alpha1.VolumePlaced); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("Placed = %+v after the restart, want True", c)
			}
		})
	}
}
