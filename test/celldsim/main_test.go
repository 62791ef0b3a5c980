package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/test/celldsim/internal/member"
	"github.com/cellfleet/cellfleet/test/celldsim/internal/store"
)

// These tests run celldsim as real processes on loopback with real disks: the
// test binary re-executes itself as celldsim when runAsCelldsim is set.
const runAsCelldsim = "CELLDSIM_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsCelldsim) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proc is one celldsim process.
type proc struct {
	t        *testing.T
	name     string
	app, int string
	dir      string
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
}

// freeAddr reserves a loopback port by binding and releasing it.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func newProc(t *testing.T, name string) *proc {
	return &proc{t: t, name: name, app: freeAddr(t), int: freeAddr(t), dir: t.TempDir()}
}

// start runs the member with peers and extra environment.
func (p *proc) start(peers []*proc, env ...string) {
	p.t.Helper()
	var addrs []string
	for _, q := range peers {
		addrs = append(addrs, q.int)
	}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), runAsCelldsim+"=1",
		"CELLD_NODE="+p.name, "CELLD_ADDR="+p.app, "CELLD_INTERNAL_ADDR="+p.int, "CELLD_WATCH="+p.dir,
		"CELLD_SIM_PEERS="+strings.Join(addrs, ","))
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() { p.exitErr = p.cmd.Wait(); close(p.exited) }()
	p.t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.exited
	})
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// kill9 kills the process and waits for it to be gone.
func (p *proc) kill9() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

var client = &http.Client{Timeout: 30 * time.Second}

func (p *proc) healthy() bool {
	resp, err := client.Get("http://" + p.app + member.HealthPath)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (p *proc) state() (member.State, error) {
	var s member.State
	resp, err := client.Get("http://" + p.int + "/state")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// put writes a record through the application API and returns the status code.
func (p *proc) put(key, value string) (int, error) {
	req, _ := http.NewRequest(http.MethodPut, "http://"+p.app+"/records/"+key, strings.NewReader(value))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// holds reports whether the member's own disk holds key.
func (p *proc) holds(key string) bool {
	resp, err := client.Get("http://" + p.int + "/internal/records/" + key)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// diskRecords opens a stopped member's disk and returns what it holds.
func diskRecords(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string]string{}
	for _, r := range s.All() {
		out[r.Key] = r.Value
	}
	return out
}

func TestWriteIsAcknowledgedOnlyAfterItsFsyncAndAPeerCopy(t *testing.T) {
	a, b := newProc(t, "a"), newProc(t, "b")
	a.start([]*proc{b}, "CELLD_SIM_BOOTSTRAP_MS=0", "CELLD_SIM_PEER_TIMEOUT_MS=300")
	poll.UntilTrue(t, 10*time.Second, "a new member with no peer reachable starts empty and healthy", a.healthy)

	code, err := a.put("lonely", "v")
	if err != nil || code == http.StatusOK {
		t.Fatalf("a write with no peer reachable was acknowledged (status %d, %v): an ack needs a peer copy", code, err)
	}

	b.start([]*proc{a}, "CELLD_SIM_BOOTSTRAP_MS=60000")
	poll.UntilTrue(t, 10*time.Second, "b recovers from a and turns healthy", b.healthy)
	var acked []string
	for i := range 20 {
		key := fmt.Sprintf("k%02d", i)
		if code, err := a.put(key, "value-"+key); err != nil || code != http.StatusOK {
			t.Fatalf("write %s with a peer up: status %d, %v", key, code, err)
		}
		acked = append(acked, key)
	}
	// kill -9 both: every acknowledged record must already be on both disks.
	a.kill9()
	b.kill9()
	for _, p := range []*proc{a, b} {
		got := diskRecords(t, p.dir)
		for _, k := range acked {
			if got[k] != "value-"+k {
				t.Errorf("acknowledged record %s is not on %s's disk after kill -9 (got %q)", k, p.name, got[k])
			}
		}
	}
}

func TestFreshDiskRecoversFromAPeerBeforeItReportsHealthy(t *testing.T) {
	a, b, c := newProc(t, "a"), newProc(t, "b"), newProc(t, "c")
	a.start([]*proc{b, c}, "CELLD_SIM_BOOTSTRAP_MS=0")
	b.start([]*proc{a, c}, "CELLD_SIM_BOOTSTRAP_MS=0")
	poll.UntilTrue(t, 10*time.Second, "a and b healthy", func() bool { return a.healthy() && b.healthy() })
	const n = 50
	for i := range n {
		key := fmt.Sprintf("r%03d", i)
		if code, err := a.put(key, key); err != nil || code != http.StatusOK {
			t.Fatalf("write %s: status %d, %v", key, code, err)
		}
	}
	// With every recovered peer frozen, the fresh member must not turn healthy.
	a.signal(syscall.SIGSTOP)
	b.signal(syscall.SIGSTOP)
	c.start([]*proc{a, b}, "CELLD_SIM_BOOTSTRAP_MS=120000", "CELLD_SIM_PEER_TIMEOUT_MS=200")
	poll.UntilTrue(t, 10*time.Second, "c serves /state", func() bool { _, err := c.state(); return err == nil })
	for range 10 {
		if c.healthy() {
			t.Fatal("a member on a fresh disk reported healthy before it recovered from a peer")
		}
		if s, _ := c.state(); s.Recovered || !s.FreshDisk {
			t.Fatalf("fresh member state %+v: want freshDisk and not recovered while no peer answers", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.signal(syscall.SIGCONT)
	poll.UntilTrue(t, 30*time.Second, "c recovers from a once a answers", c.healthy)
	s, err := c.state()
	if err != nil {
		t.Fatal(err)
	}
	if s.RecoveredFrom != a.int || s.Records != n {
		t.Fatalf("fresh member state %+v: want recoveredFrom %s and all %d records", s, a.int, n)
	}
	for i := range n {
		if key := fmt.Sprintf("r%03d", i); !c.holds(key) {
			t.Fatalf("record %s is not on the fresh member's own disk after recovery", key)
		}
	}
	b.signal(syscall.SIGCONT)
}

func TestSIGTERMDrainsTheWritesInFlightBeforeExiting(t *testing.T) {
	a, b := newProc(t, "a"), newProc(t, "b")
	a.start([]*proc{b}, "CELLD_SIM_BOOTSTRAP_MS=0", "CELLD_SIM_PEER_TIMEOUT_MS=20000", "CELLD_SHUTDOWN_TOTAL_MS=20000")
	b.start([]*proc{a}, "CELLD_SIM_BOOTSTRAP_MS=0")
	poll.UntilTrue(t, 10*time.Second, "a and b healthy", func() bool { return a.healthy() && b.healthy() })

	b.signal(syscall.SIGSTOP) // the peer copy now hangs: the write stays in flight
	result := make(chan int, 1)
	go func() { code, _ := a.put("inflight", "v"); result <- code }()
	poll.UntilTrue(t, 10*time.Second, "the write is in flight on a", func() bool {
		s, err := a.state()
		return err == nil && s.WritesFlying == 1
	})

	a.signal(syscall.SIGTERM)
	poll.UntilTrue(t, 5*time.Second, "a draining member reports unhealthy", func() bool {
		s, err := a.state()
		return err == nil && s.Draining && !a.healthy()
	})
	if code, err := a.put("late", "v"); err == nil && code == http.StatusOK {
		t.Fatal("a draining member acknowledged a new write")
	}
	select {
	case <-a.exited:
		t.Fatal("a exited with a write in flight, before its drain bound")
	default:
	}
	b.signal(syscall.SIGCONT)
	if code := <-result; code != http.StatusOK {
		t.Fatalf("the write in flight at SIGTERM finished with status %d, want it acknowledged by the drain", code)
	}
	select {
	case <-a.exited:
		if a.exitErr != nil {
			t.Fatalf("a drained member exits 0, got %v", a.exitErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a did not exit after its last write finished")
	}
}

func TestDrainIsBoundedByShutdownTotal(t *testing.T) {
	a, b := newProc(t, "a"), newProc(t, "b")
	a.start([]*proc{b}, "CELLD_SIM_BOOTSTRAP_MS=0", "CELLD_SIM_PEER_TIMEOUT_MS=60000", "CELLD_SHUTDOWN_TOTAL_MS=500")
	b.start([]*proc{a}, "CELLD_SIM_BOOTSTRAP_MS=0")
	poll.UntilTrue(t, 10*time.Second, "a and b healthy", func() bool { return a.healthy() && b.healthy() })
	b.signal(syscall.SIGSTOP)
	result := make(chan int, 1)
	go func() { code, _ := a.put("stuck", "v"); result <- code }()
	poll.UntilTrue(t, 10*time.Second, "the write is in flight on a", func() bool {
		s, err := a.state()
		return err == nil && s.WritesFlying == 1
	})
	a.signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a member kept draining far past CELLD_SHUTDOWN_TOTAL_MS=500")
	}
	if code := <-result; code == http.StatusOK {
		t.Fatal("a write whose peer copy never finished was acknowledged")
	}
}

func TestInvalidConfigurationIsRejected(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no peers but copies required", map[string]string{}, "no peers"},
		{"bad peer list", map[string]string{"CELLD_SIM_PEERS": "nohostport"}, "CELLD_SIM_PEERS"},
		{"bad dns source", map[string]string{"CELLD_SIM_PEERS": "dns:svc"}, "dns:NAME:PORT"},
		{"negative shutdown", map[string]string{"CELLD_SIM_PEERS": "a:1", "CELLD_SHUTDOWN_TOTAL_MS": "-1"}, "CELLD_SHUTDOWN_TOTAL_MS"},
		{"copies not a number", map[string]string{"CELLD_SIM_PEERS": "a:1", "CELLD_SIM_PEER_COPIES": "x"}, "CELLD_SIM_PEER_COPIES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := configFromEnv(func(k string) string { return tc.env[k] })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("configuration %v: error %v, want one naming %q", tc.env, err, tc.want)
			}
		})
	}
}

func TestPeersComeFromTheAdvertisedHeadlessService(t *testing.T) {
	cfg, err := configFromEnv(func(k string) string {
		return map[string]string{"CELLD_ADVERTISE": "f-1.f-peers.ns.svc:8081"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Peers.String(); got != "dns:f-peers.ns.svc:8081" {
		t.Fatalf("peers derived from CELLD_ADVERTISE = %q, want the headless Service dns:f-peers.ns.svc:8081", got)
	}
}
