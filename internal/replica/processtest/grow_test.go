package processtest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/host"
)

// The coordinator grows the volume's capacity through Raft: idempotent,
// refused on a follower and for a shrink; every replica converges on it and
// StatFs shows it.
func TestCapacityGrowsThroughTheCoordinatorAndNeverShrinks(t *testing.T) {
	c := startCluster(t, clusterOpts{capacity: 64 << 20})
	cl := c.client(c.clientConfig())
	leader := c.waitLeader(10 * time.Second)
	path := func(i int) string { return fmt.Sprintf("/v1/workers/%s/%s/capacity", volume, c.peers[i].ID) }
	grow := func(i int, bytes uint64) (int, string) {
		return c.post(i, path(i), host.CapacityRequest{CapacityBytes: bytes})
	}
	if code, body := grow((leader+1)%3, 128<<20); code != http.StatusMisdirectedRequest {
		t.Fatalf("growth asked of a follower: %d %s, want 421", code, body)
	}
	for range 2 { // the second is a no-op
		if code, body := grow(leader, 128<<20); code != http.StatusOK {
			t.Fatalf("grow to 128 MiB: %d %s", code, body)
		}
	}
	if code, body := grow(leader, 96<<20); code != http.StatusConflict {
		t.Fatalf("shrink to 96 MiB: %d %s, want 409", code, body)
	}
	st, err := cl.StatFs(context.Background())
	if err != nil || st.Capacity != 128<<20 {
		t.Fatalf("statfs after growth: %+v %v, want capacity %d", st, err, 128<<20)
	}
	c.converged(20*time.Second, 0, 1, 2)
}
