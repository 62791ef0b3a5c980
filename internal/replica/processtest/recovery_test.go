package processtest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
)

func record(k int) []byte { return []byte(fmt.Sprintf("record-%08d\n", k)) }

// appendRecords appends records [from, to) to a file and fails on any error.
func appendRecords(t testing.TB, cl *client.Client, ino uint64, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k := from; k < to; k++ {
		if _, _, err := cl.Append(ctx, ino, record(k)); err != nil {
			t.Fatalf("append of record %d was not acknowledged: %v", k, err)
		}
	}
}

func expectRecords(t testing.TB, cl *client.Client, ino uint64, n int) {
	t.Helper()
	var want bytes.Buffer
	for k := 0; k < n; k++ {
		want.Write(record(k))
	}
	got := readAll(t, cl, ino)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file holds %d bytes, want the %d acknowledged records (%d bytes) exactly once each", len(got), n, want.Len())
	}
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
	for i := range c.procs {
		c.kill(i)
	}
	for i := range c.procs {
		c.start(i)
	}
	c.waitLeader(20 * time.Second)
	expectRecords(t, cl, ino, 200)
	appendRecords(t, cl, ino, 200, 220)
	expectRecords(t, cl, ino, 220)
	c.converged(20*time.Second, 0, 1, 2)
}

func TestRestartFromCheckpointRestoresState(t *testing.T) {
	timing := fastTiming
	timing.SnapshotThreshold, timing.TrailingLogs = 64, 16
	c := startCluster(t, clusterOpts{timing: timing})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 150)
	for i := range c.procs {
		if code, body := c.post(i, fmt.Sprintf("/v1/workers/%s/%s/checkpoint", volume, c.peers[i].ID), nil); code != http.StatusNoContent {
			t.Fatalf("checkpoint on r%d: %d %s", i, code, body)
		}
	}
	appendRecords(t, cl, ino, 150, 170) // the tail after the checkpoint
	for i := range c.procs {
		c.kill(i)
	}
	for i := range c.procs {
		if cps, _ := os.ReadDir(filepath.Join(c.dataDir(i), journal.CheckpointDir)); len(cps) == 0 {
			t.Fatalf("r%d has no checkpoint on disk to restart from", i)
		}
		c.start(i)
	}
	c.waitLeader(20 * time.Second)
	expectRecords(t, cl, ino, 170)
	c.converged(20*time.Second, 0, 1, 2)
	resp, err := httpc.Get("http://" + c.status[0] + "/metrics")
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
	c.kill(victim)
	dir := c.dataDir(victim)
	if err := os.Remove(filepath.Join(dir, journal.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	before := listJournal(t, dir)
	c.start(victim)
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
	c.kill(victim)
	tearTail(t, filepath.Join(c.dataDir(victim), journal.JournalDir))
	appendRecords(t, cl, ino, 100, 120)
	c.start(victim)
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
