package kubehost_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1alpha1 "github.com/cellfleet/cellfleet/api/storage/v1alpha1"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// watchAcks records every releasedClaimUID the volume's VolumeReplicas
// carry: the controller removes a replica right after its acknowledgement,
// so a poll could miss it.
func (fx *fixture) watchAcks(volumeName string) func() map[string]string {
	fx.t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		fx.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(fx.ctx)
	w, err := wc.Watch(ctx, &storagev1alpha1.VolumeReplicaList{}, client.InNamespace(fx.ns),
		client.MatchingLabels{storagev1alpha1.LabelVolume: volumeName})
	if err != nil {
		cancel()
		fx.t.Fatal(err)
	}
	var mu sync.Mutex
	acks := map[string]string{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted {
				continue
			}
			vr, ok := ev.Object.(*storagev1alpha1.VolumeReplica)
			if ok && vr.Status.ReleasedClaimUID != "" {
				mu.Lock()
				acks[vr.Name] = vr.Status.ReleasedClaimUID
				mu.Unlock()
			}
		}
	}()
	fx.t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return func() map[string]string {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]string{}
		for k, v := range acks {
			out[k] = v
		}
		return out
	}
}

// workersOn reads a host's read-only worker list from its status listener.
func workersOn(t *testing.T, addr string) int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/v1/workers")
	if err != nil {
		t.Fatalf("status of host %s: %v", addr, err)
	}
	defer resp.Body.Close()
	var st []host.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("decode status of host %s: %v", addr, err)
	}
	return len(st)
}
