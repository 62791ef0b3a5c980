package processtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
)

// block is the k-th 32 KiB append of a test: large enough that a 1 MiB
// journal segment holds only a few dozen, so compaction deletes segments.
func block(k int) []byte { return bytes.Repeat(record(k), 32<<10/len(record(k))) }

// checkpoints lists replica i's checkpoint directories, newest index first.
func (c *cluster) checkpoints(i int) []string {
	c.t.Helper()
	dir := filepath.Join(c.dataDir(i), journal.CheckpointDir, "snapshots")
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	idx := func(p string) uint64 {
		var term, index, ms uint64
		fmt.Sscanf(filepath.Base(p), "%d-%d-%d", &term, &index, &ms)
		return index
	}
	slices.SortFunc(out, func(a, b string) int { return int(idx(b)) - int(idx(a)) })
	return out
}

// journalFirstIndex reads the index of the first entry frame of replica i's
// oldest segment (docs/journal-format.md: length, CRC, then the payload's
// index; a length word with the top bit set is a 16-byte batch marker).
func (c *cluster) journalFirstIndex(i int) uint64 {
	c.t.Helper()
	dir := filepath.Join(c.dataDir(i), journal.JournalDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range ents { // ReadDir sorts by name: the oldest segment first
		if !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0
		}
		for off := 0; off+16 <= len(b); {
			n := binary.BigEndian.Uint32(b[off:])
			if n&(1<<31) == 0 {
				return binary.BigEndian.Uint64(b[off+8:])
			}
			off += 16
		}
		return 0
	}
	return 0
}

// A replica whose newest checkpoint is damaged must not start from an older
// one whose following entries its journal has already dropped: raft would
// panic on the missing entry and take the whole host process down. The
// replica is lost; its host keeps serving and the volume keeps its quorum.
func TestCorruptNewestCheckpointPastTheJournalReportsLostAndKeepsTheHostServing(t *testing.T) {
	c := startCluster(t, clusterOpts{timing: checkpointTiming(), hostArgs: []string{"-journal-segment-bytes", "1048576"}})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	n := 0
	f := (c.waitLeader(10*time.Second) + 1) % 3
	// Until f holds two checkpoints and its journal starts past the older
	// one: only the newest can then rebuild its state.
	fallbackGone := func() error {
		cps := c.checkpoints(f)
		if len(cps) < 2 {
			return fmt.Errorf("r%d holds %d checkpoints", f, len(cps))
		}
		var term, older, ms uint64
		fmt.Sscanf(filepath.Base(cps[1]), "%d-%d-%d", &term, &older, &ms)
		if first := c.journalFirstIndex(f); first <= older+1 {
			return fmt.Errorf("r%d's journal starts at %d, the older checkpoint is at %d", f, first, older)
		}
		return nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		appendEach(t, cl, ino, n, n+20, block)
		n += 20
		if fallbackGone() == nil {
			c.Kill(f)
			if fallbackGone() == nil {
				break
			}
			c.Restart(f)
			c.waitState(f, replica.ReplicaStateRunning, 30*time.Second)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no state to test: %v", fallbackGone())
		}
	}

	state := filepath.Join(c.checkpoints(f)[0], "state.bin")
	b, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40 // one flipped bit in the middle of the checkpoint
	if err := os.WriteFile(state, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	st := c.waitState(f, replica.ReplicaStateLost, 30*time.Second)
	if st.DataExtent != "unknown" || !strings.Contains(st.Reason, "checkpoint") {
		t.Fatalf("r%d is lost with extent %q and reason %q; want extent unknown and the corrupt checkpoint named", f, st.DataExtent, st.Reason)
	}
	resp, err := httpc.Get("http://" + c.Status[f] + "/healthz")
	if err != nil {
		t.Fatalf("r%d's host stopped serving after its replica was found lost: %v", f, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("r%d's host /healthz: %d", f, resp.StatusCode)
	}
	appendEach(t, cl, ino, n, n+10, block)
	n += 10
	expectEach(t, cl, ino, n, block)
	if st, err := c.ReplicaStatus(f); err != nil || st.State != replica.ReplicaStateLost {
		t.Fatalf("r%d after more writes: %+v, %v; want it still lost and its host serving", f, st, err)
	}
}

// A flipped byte in the middle of a replica's newest journal segment lies
// in an entry that later batches follow, so it was acknowledged. Recovery
// must report the replica lost, not truncate it away as a torn tail (which
// silently drops every acknowledged entry after it from this replica).
func TestBitRotInTheJournalTailReportsLostInsteadOfTruncating(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 200)
	f := (c.waitLeader(10*time.Second) + 1) % 3
	c.converged(20*time.Second, 0, 1, 2)
	c.Kill(f)
	seg := c.tailSegment(f)
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[writtenEnd(b)/2] ^= 0x10
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	st := c.waitState(f, replica.ReplicaStateLost, 30*time.Second)
	if st.DataExtent != "unknown" || !strings.Contains(st.Reason, "acknowledged entry is damaged") {
		t.Fatalf("r%d is lost with extent %q and reason %q; want extent unknown and the damaged entry named", f, st.DataExtent, st.Reason)
	}
	appendRecords(t, cl, ino, 200, 220)
	expectRecords(t, cl, ino, 220)
}
