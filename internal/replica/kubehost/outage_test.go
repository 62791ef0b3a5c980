package kubehost_test

// An API outage as the hosts see it (docs/replica-engine.md, "Kubernetes
// mode": credentials are refreshed in the background through the API, so only
// an outage long enough for them to expire denies service): the hosts'
// connections to the API server are cut through nodestack's API gate for
// several Secret refresh intervals. Each host's refresh fails and it keeps
// serving on the credentials it wrote: writes are acknowledged throughout,
// the files are unchanged, and once the API is back the volume is Healthy and
// every acknowledged write reads back.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// highest is the last acknowledged write's sequence number.
func (led *ledger) highest() uint64 {
	led.mu.Lock()
	defer led.mu.Unlock()
	var h uint64
	for _, v := range led.acks {
		h = max(h, v)
	}
	return h
}

// servingOnHeld is the host's log line when a refresh failed and it kept
// the credentials it had (run.go).
const servingOnHeld = "credentials not refreshed; serving on the ones held"

func TestAnAPIOutageKeepsTheHostsServingOnTheCredentialsTheyWrote(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fx.ctx = ctx
	fx.APIGated = true
	for _, n := range []string{"kh-outage-a", "kh-outage-b", "kh-outage-c"} {
		fx.AddNode(n)
	}
	fx.StartControllerOnFreePorts()
	fx.StartHosts("-secret-refresh", "1s")
	rv := fx.volume("khoutage", 3)
	fx.ProvisionClaims(rv.Name, 3)
	poll.Until(t, 2*time.Minute, "the volume Healthy", fx.healthy(rv.Name))
	led := fx.startWrites(ctx, rv.Name)

	// The credential files each host wrote, to compare after the outage.
	held := map[string][]byte{}
	for _, vr := range fx.replicas(rv.Name) {
		p := filepath.Join(fx.Dir, vr.Spec.Node, "host-state", "credentials", vr.Name, "token")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("the host of %s wrote no credentials: %v", vr.Name, err)
		}
		held[p] = b
	}
	logged := map[string]int{}
	for _, n := range fx.Nodes {
		logged[n.Name] = bytes.Count(hostLog(t, fx, n.Name), []byte(servingOnHeld))
	}

	fx.CutAPI()
	t.Log("the hosts' API connections cut")
	poll.Until(t, time.Minute, "every host's refresh failed and it kept its credentials", func() error {
		for _, n := range fx.Nodes {
			if bytes.Count(hostLog(t, fx, n.Name), []byte(servingOnHeld)) <= logged[n.Name] {
				return fmt.Errorf("the host of %s has not logged %q since the cut", n.Name, servingOnHeld)
			}
		}
		return nil
	})
	during := led.highest()
	poll.Until(t, 30*time.Second, "writes acknowledged during the outage", func() error {
		if h := led.highest(); h < during+100 {
			return fmt.Errorf("acknowledged up to %d, %d when every refresh had failed", h, during)
		}
		return nil
	})
	for p, b := range held {
		if cur, err := os.ReadFile(p); err != nil || !bytes.Equal(cur, b) {
			t.Errorf("credentials %s changed during the outage: err = %v", p, err)
		}
	}

	fx.OpenAPI()
	t.Log("the hosts' API connections restored")
	poll.Until(t, time.Minute, "the volume Healthy after the outage", fx.healthy(rv.Name))
	led.verify(ctx)
}

// hostLog is the host's log so far.
func hostLog(t *testing.T, fx *fixture, node string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fx.Dir, node+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
