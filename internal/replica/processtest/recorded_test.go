package processtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// A recorded replica whose retained authority is missing is never initialised
// afresh (docs/replica-engine.md, "Identity, loss and recovery"). These tests
// kill real hosts around the two phases of the host's history
// (internal/replica/host/history.go) and damage real data directories.

type historyEntry struct {
	Generation uint64 `json:"generation"`
	Phase      string `json:"phase"`
}

func (c *cluster) history(i int) (historyEntry, error) {
	var h historyEntry
	b, err := os.ReadFile(host.HistoryPath(c.HostFile(i).StateDir, volume, c.peers[i].ID))
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

func (c *cluster) waitHistory(i int, gen uint64, phase host.RecordPhase) {
	c.t.Helper()
	poll.Until(c.t, 20*time.Second, fmt.Sprintf("the history of r%d records generation %d as %s", i, gen, phase), func() error {
		h, err := c.history(i)
		if err != nil {
			return err
		}
		if h.Generation != gen || h.Phase != string(phase) {
			return fmt.Errorf("it records generation %d phase %q", h.Generation, h.Phase)
		}
		return nil
	})
}

// renew makes replica i a new generation on a wiped data directory, as an
// operator replacing a lost replica does.
func (c *cluster) renew(i int, gen uint64) {
	c.t.Helper()
	c.Kill(i)
	if err := os.RemoveAll(c.dataDir(i)); err != nil {
		c.t.Fatal(err)
	}
	f := c.HostFile(i)
	f.Workers[0].Generation, f.Workers[0].Bootstrap = gen, false
	c.WriteHostFile(i, f)
}

func TestRecordedReplicaWhoseIdentityJournalOrCheckpointIsMissingOrUnsealedIsLostAndNeverInitialised(t *testing.T) {
	c := startCluster(t, clusterOpts{timing: smallCheckpointTiming()})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 150)
	// 12 MiB fill three 4 MiB journal segments: the checkpoint lets the
	// journal drop whole segments, the only compaction that reaches disk.
	bulk := createFile(t, cl, "bulk")
	chunk := make([]byte, 64<<10)
	for k := 0; k < 192; k++ {
		if _, _, err := cl.Append(context.Background(), bulk, chunk); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.waitLeader(10 * time.Second)
	victim := (leader + 1) % 3
	c.Checkpoint(t, victim)
	appendRecords(t, cl, ino, 150, 160)
	c.Kill(victim)
	dir := c.dataDir(victim)
	requireCompactedJournal(t, dir)

	identity := func(t *testing.T) journal.Identity {
		t.Helper()
		id, err := journal.ReadIdentity(dir)
		if err != nil {
			t.Fatalf("read identity: %v", err)
		}
		return id
	}
	sealedID := identity(t)
	cases := []struct {
		name   string
		damage func(t *testing.T)
		intact func(t *testing.T) // nothing was initialised
	}{
		{"identity missing", func(t *testing.T) { must(t, os.Remove(filepath.Join(dir, journal.IdentityFile))) },
			func(t *testing.T) {
				if _, err := journal.ReadIdentity(dir); err != journal.ErrIdentityMissing {
					t.Fatalf("a lost replica's missing identity was written anew (read: %v)", err)
				}
			}},
		{"identity unsealed", func(t *testing.T) {
			id := sealedID
			id.Sealed = false
			must(t, journal.WriteIdentity(dir, id))
		}, func(t *testing.T) {
			if identity(t).Sealed {
				t.Fatalf("a lost replica's unsealed identity was sealed by a fresh initialisation")
			}
			if segs, _ := filepath.Glob(filepath.Join(dir, journal.JournalDir, "*.seg")); len(segs) == 0 {
				t.Fatalf("a lost replica's journal was cleared for a fresh initialisation")
			}
		}},
		{"journal missing", func(t *testing.T) { must(t, os.RemoveAll(filepath.Join(dir, journal.JournalDir))) },
			func(t *testing.T) {
				if _, err := os.Stat(filepath.Join(dir, journal.JournalDir)); !os.IsNotExist(err) {
					t.Fatalf("a lost replica's missing journal was created anew (stat: %v)", err)
				}
			}},
		{"checkpoints missing under a compacted journal", func(t *testing.T) { must(t, os.RemoveAll(filepath.Join(dir, journal.CheckpointDir))) },
			func(t *testing.T) {
				if id := identity(t); id != sealedID {
					t.Fatalf("a lost replica's identity changed: %+v, was %+v", id, sealedID)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backup := filepath.Join(c.Dir, "backup")
			must(t, os.CopyFS(backup, os.DirFS(dir)))
			tc.damage(t)
			c.Restart(victim)
			st := c.waitState(victim, replica.ReplicaStateLost, 20*time.Second)
			if st.DataExtent != "unknown" {
				t.Fatalf("a lost replica must report its data extent unknown, got %q", st.DataExtent)
			}
			c.Kill(victim)
			tc.intact(t)
			must(t, os.RemoveAll(dir))
			must(t, os.Rename(backup, dir))
		})
	}
	c.Restart(victim)
	c.waitState(victim, replica.ReplicaStateRunning, 20*time.Second)
	appendRecords(t, cl, ino, 160, 170)
	expectRecords(t, cl, ino, 170)
	c.converged(30*time.Second, 0, 1, 2)
}

func requireCompactedJournal(t *testing.T, dir string) {
	t.Helper()
	l, err := journal.OpenJournal(dir, 4<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := l.FirstIndex()
	l.Close()
	if first <= 1 {
		t.Fatalf("the journal was not compacted after the checkpoint (first index %d): the checkpoint case would prove nothing", first)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestHistoryThatCannotBeRecordedFailsTheStartBeforeTheReplicaRuns(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	leader := c.waitLeader(10 * time.Second)
	victim := (leader + 1) % 3
	c.renew(victim, 2)
	// A directory where the record's temporary file goes makes every
	// write of it fail.
	block := host.HistoryPath(c.HostFile(victim).StateDir, volume, c.peers[victim].ID) + ".tmp"
	must(t, os.MkdirAll(block, 0o700))
	c.Restart(victim)
	st := c.waitState(victim, replica.ReplicaStateFailed, 20*time.Second)
	if !strings.Contains(st.Reason, "host history") {
		t.Fatalf("the start must fail on the history record, failed with %q", st.Reason)
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(victim), journal.IdentityFile)); !os.IsNotExist(err) {
		t.Fatalf("a replica whose history could not be recorded was initialised (identity stat: %v)", err)
	}
}

func TestCrashBetweenTheHistoryPhasesIsInitialisedAgainAndNotLost(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 20)
	leader := c.waitLeader(10 * time.Second)
	victim := (leader + 1) % 3
	dir := c.dataDir(victim)

	// Killed after the intent, with the unsealed identity an interrupted
	// initialisation leaves: it never ran Raft, so it is initialised again.
	c.renew(victim, 2)
	c.Env[victim] = []string{host.HaltEnv + "=" + string(host.FaultAfterIntent)}
	c.Restart(victim)
	c.waitHistory(victim, 2, host.PhaseIntent)
	c.Kill(victim)
	delete(c.Env, victim)
	if _, err := journal.ReadIdentity(dir); err != journal.ErrIdentityMissing {
		t.Fatalf("the identity was written before the intent was durable and the start halted (read: %v)", err)
	}
	must(t, os.MkdirAll(dir, 0o700))
	must(t, journal.WriteIdentity(dir, journal.Identity{Volume: volume, Replica: c.peers[victim].ID, Generation: 2}))
	c.Restart(victim)
	c.waitState(victim, replica.ReplicaStateRunning, 20*time.Second)
	c.waitHistory(victim, 2, host.PhaseSealed)

	// Killed with the identity sealed and the history still saying Intent
	// (Raft not started): it goes on from its data directory.
	c.renew(victim, 3)
	c.Env[victim] = []string{host.HaltEnv + "=" + string(host.FaultBeforeSealed)}
	c.Restart(victim)
	poll.Until(t, 20*time.Second, "the halted start sealed its identity", func() error {
		id, err := journal.ReadIdentity(dir)
		if err != nil {
			return err
		}
		if !id.Sealed || id.Generation != 3 {
			return fmt.Errorf("identity %+v", id)
		}
		return nil
	})
	if h, err := c.history(victim); err != nil || h.Generation != 3 || h.Phase != string(host.PhaseIntent) {
		t.Fatalf("the history must still record generation 3 as Intent before Raft starts, got %+v %v", h, err)
	}
	c.Kill(victim)
	delete(c.Env, victim)
	c.Restart(victim)
	c.waitState(victim, replica.ReplicaStateRunning, 20*time.Second)
	c.waitHistory(victim, 3, host.PhaseSealed)
	appendRecords(t, cl, ino, 20, 30)
	c.converged(30*time.Second, 0, 1, 2)

	// Once sealed, the same wipe is loss, not a fresh start.
	c.Kill(victim)
	must(t, os.RemoveAll(dir))
	c.Restart(victim)
	st := c.waitState(victim, replica.ReplicaStateLost, 20*time.Second)
	if st.DataExtent != "unknown" {
		t.Fatalf("a lost replica must report its data extent unknown, got %q", st.DataExtent)
	}
	expectRecords(t, cl, ino, 30)
}
