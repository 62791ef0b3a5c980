package processtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/journal"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// health is what replica i's host says about its worker: the status's
// Healthy field (decoded loosely, so a status without one reads as
// "absent"), /readyz's code and the cellfleet_replica_healthy gauge. /readyz
// says whether the host can take work, not whether each worker is healthy
// (docs/replica-engine.md, "replica-host"): it stays 200 for a sick worker.
type health struct {
	status string // "true", "false" or "absent"
	reason string
	readyz int
	metric string // "1", "0" or "absent"
}

func (c *cluster) health(i int) (health, error) {
	var h health
	resp, err := httpc.Get(fmt.Sprintf("http://%s/v1/workers/%s/%s", c.Status[i], volume, c.peers[i].ID))
	if err != nil {
		return h, err
	}
	var st map[string]any
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		return h, err
	}
	h.status = "absent"
	if v, ok := st["Healthy"].(bool); ok {
		h.status = fmt.Sprint(v)
	}
	h.reason, _ = st["HealthReason"].(string)
	resp, err = httpc.Get("http://" + c.Status[i] + "/readyz")
	if err != nil {
		return h, err
	}
	resp.Body.Close()
	h.readyz = resp.StatusCode
	resp, err = httpc.Get("http://" + c.Status[i] + "/metrics")
	if err != nil {
		return h, err
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return h, err
	}
	h.metric = "absent"
	re := regexp.MustCompile(fmt.Sprintf(`cellfleet_replica_healthy\{replica="%s",volume="%s"\} (\d)`, c.peers[i].ID, volume))
	if m := re.FindStringSubmatch(buf.String()); m != nil {
		h.metric = m[1]
	}
	return h, nil
}

// expectHealth waits until every signal of replica i says healthy (or not).
func (c *cluster) expectHealth(i int, healthy bool, within time.Duration) {
	c.t.Helper()
	want := health{status: "false", readyz: http.StatusOK, metric: "0"}
	if healthy {
		want = health{status: "true", readyz: http.StatusOK, metric: "1"}
	}
	poll.Until(c.t, within, fmt.Sprintf("r%d's status, /readyz and metrics report healthy=%v", i, healthy), func() error {
		h, err := c.health(i)
		if err != nil {
			return err
		}
		if h.status != want.status || h.readyz != want.readyz || h.metric != want.metric {
			return fmt.Errorf("status Healthy=%s (%s), /readyz %d, cellfleet_replica_healthy %s", h.status, h.reason, h.readyz, h.metric)
		}
		return nil
	})
}

// writtenEnd is where the bytes appended to a segment end: a new journal's
// first segment is written with zeros before its appends
// (docs/journal-format.md, "Recycled segments"), so past its last byte that
// is not zero.
func writtenEnd(segment []byte) int { return len(bytes.TrimRight(segment, "\x00")) }

// tailSegment is the segment of replica i's journal that takes appends.
func (c *cluster) tailSegment(i int) string {
	c.t.Helper()
	dir := filepath.Join(c.dataDir(i), journal.JournalDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		c.t.Fatal(err)
	}
	var segs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".seg") {
			segs = append(segs, e.Name())
		}
	}
	if len(segs) == 0 {
		c.t.Fatalf("r%d has no journal segment", i)
	}
	slices.Sort(segs)
	return filepath.Join(dir, segs[len(segs)-1])
}

// setImmutable sets or clears the inode's immutable flag: the kernel then
// refuses every write to it with EPERM, also through descriptors already
// open, as a failing disk refuses them.
func setImmutable(t *testing.T, path string, on bool) {
	t.Helper()
	flag := "-i"
	if on {
		flag = "+i"
	}
	if out, err := exec.Command("chattr", flag, path).CombinedOutput(); err != nil {
		t.Fatalf("chattr %s %s: %v: %s", flag, path, err, out)
	}
}

// A follower whose journal refuses appends keeps running and answering the
// coordinator, so it looked like a member; it must say it is not one, and
// say so again once its disk takes writes.
func TestFollowerWhoseAppendsFailReportsUnhealthyWhileItsHostStaysReady(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr (e2fsprogs) is needed to make a journal segment refuse writes")
	}
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 20)
	lead := c.waitLeader(10 * time.Second)
	f := (lead + 1) % 3
	for i := range c.peers {
		c.expectHealth(i, true, 10*time.Second)
	}

	seg := c.tailSegment(f)
	setImmutable(t, seg, true)
	t.Cleanup(func() { exec.Command("chattr", "-i", seg).Run() })
	n := 20
	// The coordinator commits with the other follower; the refused one
	// must be reported within seconds.
	deadline := time.Now().Add(10 * time.Second)
	for {
		appendRecords(t, cl, ino, n, n+10)
		n += 10
		h, err := c.health(f)
		if err == nil && h.status == "false" && h.readyz == http.StatusOK && h.metric == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("r%d's journal refuses appends but after 10s it reports status Healthy=%s, /readyz %d, cellfleet_replica_healthy %s (err %v)",
				f, h.status, h.readyz, h.metric, err)
		}
	}
	if h, _ := c.health(f); !strings.Contains(h.reason, "journal appends failing") {
		t.Fatalf("r%d's health reason %q does not name the failing appends", f, h.reason)
	}
	c.expectHealth(lead, true, 5*time.Second)
	c.expectHealth(3-lead-f, true, 5*time.Second)

	setImmutable(t, seg, false)
	appendRecords(t, cl, ino, n, n+10)
	n += 10
	c.expectHealth(f, true, 20*time.Second)
	expectRecords(t, cl, ino, n)
	c.converged(20*time.Second, 0, 1, 2)
}

// readyzOf is the status code of host i's /readyz.
func readyzOf(t testing.TB, c *cluster, i int) int {
	t.Helper()
	resp, err := httpc.Get("http://" + c.Status[i] + "/readyz")
	if err != nil {
		t.Fatalf("/readyz of r%d: %v", i, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
