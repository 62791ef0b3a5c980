package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

type fixture struct {
	t   *testing.T
	dir string
	h   *host.Host
	srv *httptest.Server // the network listener: health, readiness, metrics
	ac  *http.Client     // the admin socket
	ca  string
	crt string
	key string
	tok string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("v", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca.Issue([]string{"w.test"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, ca: filepath.Join(dir, "ca.crt"), crt: filepath.Join(dir, "w.crt"),
		key: filepath.Join(dir, "w.key"), tok: filepath.Join(dir, "token")}
	for p, b := range map[string][]byte{f.ca: ca.CertPEM, f.crt: crt, f.key: key, f.tok: []byte(pki.NewToken())} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.h, err = host.New(host.Config{StateDir: filepath.Join(dir, "state"), Limits: host.DefaultLimits(), SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.h.Handler())
	f.ac = serveAdmin(t, f.h)
	t.Cleanup(func() { f.srv.Close(); f.h.Close() })
	return f
}

// adminURL is the base of admin requests; the admin client dials the
// socket whatever the URL's host.
const adminURL = "http://admin"

// serveAdmin serves h's admin API on a real unix socket made by
// host.ListenAdmin and returns a client that reaches it.
func serveAdmin(t *testing.T, h *host.Host) *http.Client {
	t.Helper()
	dir, err := os.MkdirTemp("", "rh-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "admin.sock")
	ln, err := host.ListenAdmin(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.AdminHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); os.RemoveAll(dir) })
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
}

// spec is a single-replica volume whose data directory must be published
// before it starts.
func (f *fixture) spec(i int) host.WorkerSpec {
	return host.WorkerSpec{Volume: fmt.Sprintf("v%03d", i), Replica: "r0", Generation: 1, Listen: "127.0.0.1:0",
		Self: replica.Peer{ID: "r0", Address: "127.0.0.1:1", ServerName: "w.test"}, Bootstrap: true,
		DataDir: filepath.Join(f.dir, "data", fmt.Sprint(i)), CAFile: f.ca, CertFile: f.crt, KeyFile: f.key,
		TokenFile: f.tok, AwaitDataDir: true, CapacityBytes: 1 << 20}
}

func (f *fixture) post(spec host.WorkerSpec) (int, map[string]string) {
	f.t.Helper()
	b, _ := json.Marshal(spec)
	resp, err := f.ac.Post(adminURL+"/v1/workers", "application/json", bytes.NewReader(b))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (f *fixture) metric(line string) bool {
	resp, err := http.Get(f.srv.URL + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(b), line+"\n")
}

// publish bind-mounts dir onto itself: a mount appears at dir in this
// mount namespace, which is what a worker with AwaitDataDir waits for.
func publish(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

func TestAdmissionBoundsAnswerPendingOrUnavailableNeverFewerReplicas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publishing a data directory needs a bind mount, which needs root")
	}
	f := newFixture(t)

	// Starts: four workers wait for their data directories inside a start
	// slot; the fifth is admitted as Pending.
	for i := 0; i < 4; i++ {
		if code, body := f.post(f.spec(i)); code != http.StatusCreated || body["state"] != string(replica.ReplicaStateStarting) {
			t.Fatalf("worker %d: want 201 Starting, got %d %v", i, code, body)
		}
	}
	code, body := f.post(f.spec(4))
	if code != http.StatusAccepted || body["state"] != string(replica.ReplicaStatePending) ||
		body["condition"] != string(host.ConditionPending) || body["reason"] != string(host.ReasonStartLimitReached) {
		t.Fatalf("the 5th concurrent start must be answered 202 Pending/StartLimitReached, got %d %v", code, body)
	}
	poll.UntilTrue(t, 5*time.Second, "metrics show 4 starts in use and 1 waiting", func() bool {
		return f.metric(`cellfleet_host_admission_in_use{bound="starts"} 4`) && f.metric(`cellfleet_host_admission_waiting{bound="starts"} 1`)
	})

	// HTTP operations: 32 long polls hold every shared slot; the 33rd
	// request is refused as Unavailable.
	var polls sync.WaitGroup
	codes := make(chan int, 32)
	for i := 0; i < 32; i++ {
		polls.Add(1)
		go func() {
			defer polls.Done()
			resp, err := f.ac.Get(adminURL + "/v1/workers/v000/r0?waitFor=Running&timeout=60s")
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	poll.UntilTrue(t, 10*time.Second, "32 HTTP operations in flight", func() bool {
		return f.metric(`cellfleet_host_admission_in_use{bound="http_operations"} 32`)
	})
	resp, err := f.ac.Get(adminURL + "/v1/workers")
	if err != nil {
		t.Fatal(err)
	}
	var cond host.Condition
	_ = json.NewDecoder(resp.Body).Decode(&cond)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || cond.Condition != host.ConditionUnavailable || cond.Reason != host.ReasonHTTPOperationLimitReached {
		t.Fatalf("the 33rd concurrent HTTP operation must be answered 503 Unavailable/HTTPOperationLimitReached, got %d %+v", resp.StatusCode, cond)
	}
	// Workers waiting for a slot say so in their own status; the host
	// itself still takes work (docs/decisions/0011-node-leases.md).
	if code := get(t, f.srv.URL+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz must stay 200 while workers are pending or starting (the host takes work), got %d", code)
	}

	// Publishing the data directories (a bind visible in this mount
	// namespace, as the local driver's publication) lets all five start,
	// in turn.
	for i := 0; i < 5; i++ {
		publish(t, f.spec(i).DataDir)
	}
	polls.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a long poll for Running ended with %d", c)
		}
	}
	for i := 0; i < 5; i++ {
		key := f.spec(i).Key()
		poll.UntilTrue(t, 20*time.Second, key+" running", func() bool {
			_, st, _ := f.h.Worker(key)
			return st.State == replica.ReplicaStateRunning
		})
	}

	// Workers: 128 hosted (the rest still awaiting publication), then the
	// 129th is refused as Unavailable and nothing about it is hosted.
	for i := 5; i < 128; i++ {
		if _, cond, err := f.h.Add(f.spec(i)); err != nil || (cond != nil && cond.Condition != host.ConditionPending) {
			t.Fatalf("worker %d: %v %+v", i, err, cond)
		}
	}
	code, body = f.post(f.spec(128))
	if code != http.StatusServiceUnavailable || body["condition"] != string(host.ConditionUnavailable) || body["reason"] != string(host.ReasonWorkerLimitReached) {
		t.Fatalf("the 129th worker must be answered 503 Unavailable/WorkerLimitReached, got %d %v", code, body)
	}
	if _, _, ok := f.h.Worker(f.spec(128).Key()); ok {
		t.Fatalf("the refused 129th worker is hosted anyway")
	}
	if n := len(f.h.Statuses()); n != 128 {
		t.Fatalf("host reports %d workers, want 128", n)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
