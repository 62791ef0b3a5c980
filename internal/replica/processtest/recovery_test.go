package processtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

func record(k int) []byte { return []byte(fmt.Sprintf("record-%08d\n", k)) }

// appendRecords appends records [from, to) to a file and fails on any error.
func appendRecords(t testing.TB, cl *client.Client, ino uint64, from, to int) {
	t.Helper()
	appendEach(t, cl, ino, from, to, record)
}

// expectRecords fails unless a file holds records [0, n) exactly once each.
func expectRecords(t testing.TB, cl *client.Client, ino uint64, n int) {
	t.Helper()
	expectEach(t, cl, ino, n, record)
}

// appendEach appends payload(k) for each k in [from, to) to a file and
// fails on any error.
func appendEach(t testing.TB, cl *client.Client, ino uint64, from, to int, payload func(k int) []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k := from; k < to; k++ {
		if _, _, err := cl.Append(ctx, ino, payload(k)); err != nil {
			t.Fatalf("append %d was not acknowledged: %v", k, err)
		}
	}
}

// expectEach fails unless a file holds payload(k) for each k in [0, n),
// exactly once each and in order.
func expectEach(t testing.TB, cl *client.Client, ino uint64, n int, payload func(k int) []byte) {
	t.Helper()
	var want bytes.Buffer
	for k := 0; k < n; k++ {
		want.Write(payload(k))
	}
	if got := readAll(t, cl, ino); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file holds %d bytes, want the %d acknowledged appends (%d bytes) exactly once each", len(got), n, want.Len())
	}
}

// smallCheckpointTiming checkpoints every 64 entries and keeps 16 behind
// each checkpoint, so a test of a few hundred writes compacts its journal.
func smallCheckpointTiming() replica.Timing {
	t := proccluster.FastTiming
	t.SnapshotThreshold, t.TrailingLogs = 64, 16
	return t
}

func readAll(t testing.TB, cl *client.Client, ino uint64) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []byte
	for {
		b, err := cl.Read(ctx, ino, uint64(len(out)), 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", len(out), err)
		}
		if len(b) == 0 {
			return out
		}
		out = append(out, b...)
	}
}

func createFile(t testing.TB, cl *client.Client, name string) uint64 {
	t.Helper()
	a, err := cl.Create(context.Background(), client.RootIno, name, 0o644, 0, 0)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return a.Ino
}

func TestRestartOfAllThreeKeepsAcknowledgedWrites(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 200)
	for i := range c.peers {
		c.Kill(i)
	}
	for i := range c.peers {
		c.Restart(i)
	}
	c.waitLeader(20 * time.Second)
	expectRecords(t, cl, ino, 200)
	appendRecords(t, cl, ino, 200, 220)
	expectRecords(t, cl, ino, 220)
	c.converged(20*time.Second, 0, 1, 2)
}

func TestRestartFromCheckpointRestoresState(t *testing.T) {
	c := startCluster(t, clusterOpts{timing: smallCheckpointTiming()})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 150)
	for i := range c.peers {
		c.Checkpoint(t, i)
	}
	appendRecords(t, cl, ino, 150, 170) // the tail after the checkpoint
	for i := range c.peers {
		c.Kill(i)
	}
	for i := range c.peers {
		if cps, _ := os.ReadDir(filepath.Join(c.dataDir(i), journal.CheckpointDir)); len(cps) == 0 {
			t.Fatalf("r%d has no checkpoint on disk to restart from", i)
		}
		c.Restart(i)
	}
	c.waitLeader(20 * time.Second)
	expectRecords(t, cl, ino, 170)
	c.converged(20*time.Second, 0, 1, 2)
	resp, err := httpc.Get("http://" + c.Status[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	m := regexp.MustCompile(`cellfleet_replica_checkpoint_restore_seconds_count\{replica="r0",volume="vol"\} (\d+)`).FindStringSubmatch(buf.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("r0 restarted without restoring a checkpoint (no restore recorded in its metrics)")
	}
}

func TestDeletedIdentityRecordReportsReplicaStateLost(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 20)
	leader := c.waitLeader(10 * time.Second)
	victim := (leader + 1) % 3
	c.Kill(victim)
	dir := c.dataDir(victim)
	if err := os.Remove(filepath.Join(dir, journal.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	before := listJournal(t, dir)
	c.Restart(victim)
	st := c.waitState(victim, replica.ReplicaStateLost, 20*time.Second)
	if st.DataExtent != "unknown" {
		t.Fatalf("a lost replica must state its data extent as unknown, got %q", st.DataExtent)
	}
	if _, err := os.Stat(filepath.Join(dir, journal.IdentityFile)); err == nil {
		t.Fatalf("the lost replica was initialised afresh: a new identity record was written")
	}
	if after := listJournal(t, dir); after != before {
		t.Fatalf("the lost replica's journal was changed:\nbefore %s\nafter  %s", before, after)
	}
	appendRecords(t, cl, ino, 20, 30) // the other two keep serving
	expectRecords(t, cl, ino, 30)
}

func listJournal(t testing.TB, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, journal.JournalDir))
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, e := range ents {
		fi, _ := e.Info()
		parts = append(parts, fmt.Sprintf("%s:%d:%d", e.Name(), fi.Size(), fi.ModTime().UnixNano()))
	}
	return strings.Join(parts, " ")
}

func TestTornJournalTailIsTruncatedOnRecovery(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 100)
	leader := c.waitLeader(10 * time.Second)
	victim := (leader + 1) % 3
	c.Kill(victim)
	tearTail(t, filepath.Join(c.dataDir(victim), journal.JournalDir))
	appendRecords(t, cl, ino, 100, 120)
	c.Restart(victim)
	c.waitState(victim, replica.ReplicaStateRunning, 20*time.Second)
	c.converged(30*time.Second, 0, 1, 2)
	expectRecords(t, cl, ino, 120)
}

// tearTail garbles the last 40 written bytes of the newest segment, as a
// crash before fsync leaves a partially written last batch.
func tearTail(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".seg") {
			last = e.Name()
		}
	}
	if last == "" {
		t.Fatal("no journal segment to tear")
	}
	p := filepath.Join(dir, last)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	end := writtenEnd(b)
	if end < 100 {
		t.Fatalf("segment %s holds only %d bytes", last, end)
	}
	fh, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(bytes.Repeat([]byte{0xA5}, 40), int64(end-40)); err != nil {
		t.Fatal(err)
	}
}
