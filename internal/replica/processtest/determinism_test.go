package processtest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
)

func TestReplicasConfiguredWithDifferentLimitsApplyTheSameOutcomes(t *testing.T) {
	capacities := []uint64{1 << 20, 2 << 20, 4 << 20}
	sessions := []int{2, 3, 4}
	c := startCluster(t, clusterOpts{configure: func(i int, f *host.StandaloneFile) {
		f.Workers[0].CapacityBytes = capacities[i]
		f.Workers[0].MaxSessions = sessions[i]
	}})
	cl := c.client(c.clientConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fs, err := cl.StatFs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(capacities, fs.Capacity) {
		t.Fatalf("the volume reports capacity %d, not one a replica was configured with (%v)", fs.Capacity, capacities)
	}
	ino := createFile(t, cl, "fill")
	chunk := bytes.Repeat([]byte{'x'}, 256<<10)
	var written uint64
	for {
		_, err := cl.Write(ctx, ino, written, chunk)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatalf("write at %d: %v", written, err)
		}
		written += uint64(len(chunk))
		if written > 8<<20 {
			t.Fatalf("wrote %d bytes into a volume of capacity %d without ENOSPC", written, fs.Capacity)
		}
	}
	if written != fs.Capacity {
		t.Fatalf("ENOSPC after %d bytes, want at the replicated capacity %d", written, fs.Capacity)
	}
	for k := 0; k < 6; k++ { // more sessions than any replica's table keeps
		other := c.client(c.clientConfig())
		createFile(t, other, "s"+string(rune('a'+k)))
		other.Close()
	}
	c.converged(30*time.Second, 0, 1, 2)

	old := c.waitLeader(10 * time.Second)
	c.Kill(old)
	others := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == old })
	c.leaderAmong(20*time.Second, others...)
	after, err := cl.StatFs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Capacity != fs.Capacity {
		t.Fatalf("a coordinator configured differently reports capacity %d, the volume's is %d", after.Capacity, fs.Capacity)
	}
	if _, err := cl.Write(ctx, ino, written, chunk); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a write past the replicated capacity under the new coordinator: got %v, want ENOSPC", err)
	}
	c.converged(30*time.Second, others...)
}

func TestCoordinatorWhoseDiskFailsStopsServingAndTheCommittedOutcomeIsTheGroups(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "before")
	appendRecords(t, cl, ino, 0, 20)
	leader := c.waitLeader(10 * time.Second)

	// The coordinator's chunk directory becomes a file: its next chunk
	// creation fails with a local I/O error no other replica sees.
	chunks := filepath.Join(c.dataDir(leader), "store", "chunks")
	if err := os.RemoveAll(chunks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(chunks, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	victim := createFile(t, cl, "after")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	payload := bytes.Repeat([]byte("committed "), 400)
	if _, err := cl.Write(ctx, victim, 0, payload); err != nil {
		t.Fatalf("a write that committed must get the group's outcome, not the failed coordinator's: %v", err)
	}
	st := c.waitState(leader, replica.ReplicaStateFailed, 15*time.Second)
	t.Logf("failed coordinator r%d reports %s: %s", leader, st.State, st.Reason)
	// The host stays ready for its other workers: /readyz says whether it
	// can take work; the failed worker says Failed in its own status.
	if code := readyzOf(t, c, leader); code != http.StatusOK {
		t.Fatalf("the host of the replica whose disk failed answers /readyz %d, want 200 (its worker reports Failed itself)", code)
	}
	if got := readAll(t, cl, victim); !bytes.Equal(got, payload) {
		t.Fatalf("the committed write reads back %d bytes, want %d", len(got), len(payload))
	}
	expectRecords(t, cl, ino, 20)
	others := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == leader })
	c.converged(30*time.Second, others...)

	pinnedCfg := c.clientConfig()
	pinnedCfg.Endpoints = slices.DeleteFunc(pinnedCfg.Endpoints, func(e client.Endpoint) bool { return e.ID != c.peers[leader].ID })
	pinnedCfg.RetryBudget = 2 * time.Second
	pinned, err := client.Dial(ctx, pinnedCfg)
	if err == nil {
		defer pinned.Close()
		_, err = pinned.Read(ctx, victim, 0, 100)
	}
	if err == nil {
		t.Fatalf("the replica whose disk failed still serves a client")
	}
}
