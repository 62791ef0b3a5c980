package processtest

import (
	"encoding/json"
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

// refused are the answers a request may get where it is not served or not
// authorised.
var refused = []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed}

// checkpointCount counts replica i's checkpoints (hashicorp/raft's file
// snapshot store keeps one directory each under snapshots/).
func checkpointCount(t *testing.T, c *cluster, i int) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(c.dataDir(i), journal.CheckpointDir, "snapshots"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(ents)
}

func TestAdminMutationsOverTCPAreRefusedAndChangeNothingWhileTheSocketServesThem(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	cl := c.client(c.clientConfig())
	ino := createFile(t, cl, "data")
	appendRecords(t, cl, ino, 0, 20)
	leader := c.waitLeader(10 * time.Second)
	victim := (leader + 1) % 3
	lid, vid := c.peers[leader].ID, c.peers[victim].ID
	checkpoints := checkpointCount(t, c, leader)
	newSpec := c.HostFile(leader).Workers[0]
	newSpec.Volume = "intruder"
	specBody := mustJSON(t, newSpec)
	memberBody := mustJSON(t, replica.Peer{ID: "r9", Address: "127.0.0.1:1", ServerName: "r9.example"})

	base := "http://" + c.Status[leader]
	worker := fmt.Sprintf("%s/v1/workers/%s/%s", base, volume, lid)
	for _, rq := range []struct{ method, url, body string }{
		{http.MethodPost, base + "/v1/workers", specBody},
		{http.MethodDelete, worker, ""},
		{http.MethodPost, worker + "/members", memberBody},
		{http.MethodDelete, worker + "/members/" + vid, ""},
		{http.MethodPost, worker + "/checkpoint", ""},
		{http.MethodPost, worker + "/capacity", `{"capacityBytes": 1099511627776}`},
		{http.MethodPost, worker + "/transfer/" + vid, ""},
		{http.MethodPut, worker, specBody},
		{http.MethodPatch, worker + "/members", memberBody},
		{http.MethodGet, worker + "/digest", ""},
		{http.MethodGet, worker + "?waitFor=Running&timeout=1s", ""},
	} {
		req, _ := http.NewRequest(rq.method, rq.url, strings.NewReader(rq.body))
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatalf("%s %s over TCP: %v", rq.method, rq.url, err)
		}
		resp.Body.Close()
		if !slices.Contains(refused, resp.StatusCode) {
			t.Errorf("%s %s over TCP without credentials answered %d; the network listener must refuse it (one of %v)",
				rq.method, strings.TrimPrefix(rq.url, base), resp.StatusCode, refused)
		}
	}

	// Nothing changed: the worker is still hosted and the only one, both
	// followers are still members (they keep applying), no member was
	// added and no checkpoint was taken.
	st := c.waitState(leader, replica.ReplicaStateRunning, 5*time.Second)
	if n := len(mustStatuses(t, c, leader)); n != 1 {
		t.Fatalf("the host runs %d workers after the refused requests, want its 1", n)
	}
	if st.RaftState == "Leader" {
		var ids []string
		for _, f := range st.Followers {
			ids = append(ids, f.ID)
		}
		slices.Sort(ids)
		want := []string{c.peers[(leader+1)%3].ID, c.peers[(leader+2)%3].ID}
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Fatalf("the coordinator's followers are %v after the refused requests, want %v", ids, want)
		}
	}
	appendRecords(t, cl, ino, 20, 30)
	c.converged(20*time.Second, 0, 1, 2)
	if n := checkpointCount(t, c, leader); n != checkpoints {
		t.Fatalf("the coordinator holds %d checkpoints after a refused checkpoint request, had %d", n, checkpoints)
	}

	// The admin socket serves them, with the file mode that keeps other
	// users out, and bounds request bodies.
	fi, err := os.Stat(c.Admin[leader])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket %s has mode %v, want a socket with permissions 0600", c.Admin[leader], fi.Mode())
	}
	if code, body := c.post(leader, fmt.Sprintf("/v1/workers/%s/%s/checkpoint", volume, lid), nil); code != http.StatusNoContent {
		t.Fatalf("checkpoint over the admin socket: %d %s", code, body)
	}
	if n := checkpointCount(t, c, leader); n <= checkpoints {
		t.Fatalf("the admin socket answered the checkpoint but the coordinator holds %d checkpoints, had %d", n, checkpoints)
	}
	big := strings.Repeat(" ", 64<<10) + specBody
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/workers", strings.NewReader(big))
	if code, body := c.do(req); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a worker spec past the 64 KiB body bound must be answered 413, got %d %s", code, body)
	}
	expectRecords(t, cl, ino, 30)
}

func mustStatuses(t *testing.T, c *cluster, i int) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	resp, err := httpc.Get("http://" + c.Status[i] + "/v1/workers")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read-only status over TCP answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
