package processtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/durable"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
)

// Power-cut tests: the kill -9 tests keep the page cache, so a write the
// engine acknowledged before it reached the disk still survives them. Here
// every replica's data and state directories sit on a powercut filesystem;
// a cut kills the replica-host with SIGKILL and then drops everything not
// fsync'd (file data) or not covered by a directory fsync (creates,
// renames, unlinks) before the host restarts.

// powerDisks is one powercut filesystem per replica.
type powerDisks struct {
	fs   []*powercut.FS
	lost powercut.Lost // summed over every cut
}

func newPowerDisks(replicas int) *powerDisks {
	return &powerDisks{fs: make([]*powercut.FS, replicas)}
}

// disk is clusterOpts.disk: it mounts replica i's filesystem and makes the
// data and state directories durable, as the deployer of a real disk would.
func (d *powerDisks) disk(t testing.TB, i int) string {
	t.Helper()
	p := powercut.MountT(t)
	d.fs[i] = p
	for _, sub := range []string{"data", "state"} {
		if err := os.Mkdir(filepath.Join(p.Mountpoint(), sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := durable.SyncDir(p.Mountpoint()); err != nil {
		t.Fatal(err)
	}
	return p.Mountpoint()
}

// cut kills the given replicas' hosts, cuts power on their filesystems and
// starts them again.
func (d *powerDisks) cut(c *cluster, replicas ...int) {
	c.t.Helper()
	for _, i := range replicas {
		c.Kill(i)
	}
	for _, i := range replicas {
		lost := d.fs[i].CutT(c.t)
		d.lost.Pages += lost.Pages
		d.lost.Directories += lost.Directories
	}
	for _, i := range replicas {
		c.Restart(i)
	}
}

// noCheckpoints keeps every run below the checkpoint threshold, so that a
// failure of these runs is one of power loss, not of a follower rejoining
// through a checkpoint (the rejoin tests cover that).
var noCheckpoints = func() replica.Timing {
	t := proccluster.FastTiming
	t.SnapshotThreshold, t.TrailingLogs, t.SnapshotInterval = 1<<30, 1<<30, time.Hour
	return t
}()

func TestPowerCutLosesNoAcknowledgedWriteAndStaysLinearizable(t *testing.T) {
	cases := []struct {
		name string
		// victims chooses whose power is cut, given the current coordinator.
		victims func(leader int) []int
	}{
		{"all three replicas", func(int) []int { return []int{0, 1, 2} }},
		{"the coordinator and one follower", func(l int) []int { return []int{l, (l + 1) % 3} }},
		{"the coordinator alone", func(l int) []int { return []int{l} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			disks := newPowerDisks(3)
			c := startCluster(t, clusterOpts{timing: noCheckpoints, disk: disks.disk})
			runPowerCuts(t, c, disks, tc.victims)
		})
	}
}

// powerCutCycles is how many cuts each case makes.
const powerCutCycles = 5

func runPowerCuts(t *testing.T, c *cluster, disks *powerDisks, victims func(leader int) []int) {
	l := startLoad(t, c, 3, 0)
	for cycle := 1; cycle <= powerCutCycles; cycle++ {
		rng := rand.New(rand.NewSource(int64(cycle)))
		l.progressBy(int64(30+rng.Intn(60)), 45*time.Second, fmt.Sprintf("cycle %d: load runs before the cut", cycle))
		cutOff := victims(c.waitLeader(20 * time.Second))
		disks.cut(c, cutOff...)
		for _, i := range cutOff {
			c.waitState(i, "Running", 30*time.Second)
		}
		l.progressBy(10, 45*time.Second, fmt.Sprintf("cycle %d: clients are served again after power was cut on %v", cycle, cutOff))
	}
	l.check("power cuts")
	c.waitLeader(20 * time.Second)
	c.converged(30*time.Second, 0, 1, 2)
	if disks.lost.Pages == 0 {
		t.Fatalf("%d cuts dropped no unsynced page: the run would not notice a missing fsync", powerCutCycles)
	}
	t.Logf("%d power cuts dropped %d unsynced pages and %d directories' unsynced entries; %d register operations checked, %d acknowledged operations",
		powerCutCycles, disks.lost.Pages, disks.lost.Directories, len(l.h.ops), l.progress.Load())
}

func TestPowerCutOfAllThreeAfterACheckpointKeepsAcknowledgedWrites(t *testing.T) {
	disks := newPowerDisks(3)
	timing := smallCheckpointTiming()
	// 1 MiB segments, so that compaction behind the checkpoint deletes the
	// segments holding the first writes: they then exist only in the
	// checkpoint.
	c := startCluster(t, clusterOpts{timing: timing, disk: disks.disk, hostArgs: []string{"-journal-segment-bytes", "1048576"}})
	cl := c.client(c.clientConfig())
	big := createFile(t, cl, "big")
	const chunks, chunkSize = 48, 64 << 10
	want := make([]byte, 0, chunks*chunkSize)
	for k := 0; k < chunks; k++ {
		chunk := bytes.Repeat([]byte{byte('a' + k%26)}, chunkSize)
		if _, err := cl.Write(context.Background(), big, uint64(k*chunkSize), chunk); err != nil {
			t.Fatalf("write of chunk %d was not acknowledged: %v", k, err)
		}
		want = append(want, chunk...)
	}
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 150)
	for i := range c.peers {
		c.Checkpoint(t, i)
	}
	appendRecords(t, cl, ino, 150, 170) // the tail after the checkpoint
	disks.cut(c, 0, 1, 2)
	c.waitLeader(20 * time.Second)
	if got := readAll(t, cl, big); !bytes.Equal(got, want) {
		t.Fatalf("after a power cut the file written before the checkpoint holds %d bytes, want the %d acknowledged", len(got), len(want))
	}
	expectRecords(t, cl, ino, 170)
	for i := range c.peers {
		if !hasCompleteCheckpoint(t, c.dataDir(i)) {
			t.Fatalf("r%d has no complete checkpoint (meta.json and state.bin) after the power cut: its acknowledged checkpoint was not durable", i)
		}
	}
	appendRecords(t, cl, ino, 170, 180)
	expectRecords(t, cl, ino, 180)
	c.converged(20*time.Second, 0, 1, 2)
	t.Logf("the cut dropped %d unsynced pages and %d directories' unsynced entries", disks.lost.Pages, disks.lost.Directories)
}

// hasCompleteCheckpoint reports whether a data directory holds a checkpoint
// with both files raft's snapshot store needs to open it.
func hasCompleteCheckpoint(t *testing.T, dataDir string) bool {
	t.Helper()
	root := filepath.Join(dataDir, journal.CheckpointDir, "snapshots") // raft's FileSnapshotStore layout
	cps, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		dir := filepath.Join(root, cp.Name())
		_, metaErr := os.Stat(filepath.Join(dir, "meta.json"))
		_, stateErr := os.Stat(filepath.Join(dir, "state.bin"))
		if metaErr == nil && stateErr == nil {
			return true
		}
	}
	return false
}
