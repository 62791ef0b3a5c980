package processtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

const volume = "vol"

// harnessSegmentBytes is the journal segment size the hosts run with: small
// enough that tests roll and compact segments.
const harnessSegmentBytes = 4 << 20

var hostBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "replica-host-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hostBinary = filepath.Join(dir, "replica-host")
	build := exec.Command("go", "build", "-o", hostBinary, "github.com/cellfleet/cellfleet/cmd/replica-host")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building replica-host for the process tests failed:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fastTiming keeps failover well under a second on loopback.
var fastTiming = replica.Timing{HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
	LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 10 * time.Millisecond}

type clusterOpts struct {
	replicas int
	proxied  bool // route worker-to-worker traffic through fault-injecting proxies
	timing   replica.Timing
	hostArgs []string
	capacity uint64
	// maxSessions sets the volume's exactly-once table size (0: default).
	maxSessions int
	// disk, if set, returns the directory that holds replica i's data and
	// state directories (a power-cut mount, say) instead of the cluster
	// directory. It runs before any process starts; its cleanups run after
	// the processes are killed.
	disk func(t testing.TB, i int) string
	// configure edits replica i's host file before its first start.
	configure func(i int, f *host.StandaloneFile)
}

type cluster struct {
	t       testing.TB
	dir     string
	opts    clusterOpts
	gen     standalone.Generated
	peers   []replica.Peer // real addresses
	status  []string       // TCP status listeners: health, readiness, metrics, read-only status
	admin   []string       // admin API unix sockets: every /v1 request, mutations included
	procs   []*exec.Cmd
	proxies map[[2]int]*proxy
	env     map[int][]string // extra environment of host i's next start (fault hooks)
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

func startCluster(t testing.TB, o clusterOpts) *cluster {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 3
	}
	if o.timing == (replica.Timing{}) {
		o.timing = fastTiming
	}
	if o.capacity == 0 {
		o.capacity = 256 << 20
	}
	c := &cluster{t: t, dir: t.TempDir(), opts: o, procs: make([]*exec.Cmd, o.replicas), proxies: map[[2]int]*proxy{},
		env: map[int][]string{}}
	ports := freePorts(t, 2*o.replicas)
	gen, err := standalone.Generate(standalone.GenerateOptions{Dir: c.dir, Volume: volume, Replicas: o.replicas,
		Ports: ports[:o.replicas], StatusPorts: ports[o.replicas:], Capacity: o.capacity, Timing: o.timing})
	if err != nil {
		t.Fatalf("generate standalone configuration: %v", err)
	}
	c.gen = gen
	// Sockets live under a short directory of their own: t.TempDir() paths
	// named after long tests exceed the kernel's 107-byte socket path.
	sockDir, err := os.MkdirTemp("", "rh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	for i := 0; i < o.replicas; i++ {
		f := c.hostFile(i)
		c.peers = append(c.peers, f.Workers[0].Self)
		c.status = append(c.status, f.StatusListen)
		c.admin = append(c.admin, filepath.Join(sockDir, fmt.Sprintf("r%d.sock", i)))
	}
	if o.maxSessions > 0 {
		for i := 0; i < o.replicas; i++ {
			f := c.hostFile(i)
			f.Workers[0].MaxSessions = o.maxSessions
			c.writeHostFile(i, f)
		}
	}
	if o.disk != nil {
		c.placeOnDisks()
	}
	if o.configure != nil {
		for i := 0; i < o.replicas; i++ {
			f := c.hostFile(i)
			o.configure(i, &f)
			c.writeHostFile(i, f)
		}
	}
	if o.proxied {
		c.insertProxies()
	}
	t.Cleanup(c.shutdown)
	for i := range c.procs {
		c.start(i)
	}
	c.waitLeader(20 * time.Second)
	return c
}

func (c *cluster) hostFile(i int) host.StandaloneFile {
	c.t.Helper()
	f, err := host.LoadStandalone(c.gen.HostFiles[i])
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

func (c *cluster) writeHostFile(i int, f host.StandaloneFile) {
	c.t.Helper()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.gen.HostFiles[i], b, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// placeOnDisks moves every replica's data and state directories onto the
// directory opts.disk gives for it.
func (c *cluster) placeOnDisks() {
	for i := range c.peers {
		root := c.opts.disk(c.t, i)
		f := c.hostFile(i)
		f.Workers[0].DataDir = filepath.Join(root, "data")
		f.StateDir = filepath.Join(root, "state")
		c.writeHostFile(i, f)
	}
}

// insertProxies points every worker's route to every peer at its own proxy.
func (c *cluster) insertProxies() {
	for i := range c.peers {
		f := c.hostFile(i)
		for k, p := range f.Workers[0].Peers {
			j := c.index(p.ID)
			px := newProxy(c.t, c.peers[j].Address)
			c.proxies[[2]int{i, j}] = px
			f.Workers[0].Peers[k].Address = px.addr()
		}
		c.writeHostFile(i, f)
	}
}

func (c *cluster) index(id string) int {
	for i, p := range c.peers {
		if p.ID == id {
			return i
		}
	}
	c.t.Fatalf("unknown replica %s", id)
	return -1
}

// isolate cuts every link to and from replica i; heal restores them.
func (c *cluster) isolate(i int, cut bool) {
	for k, px := range c.proxies {
		if k[0] == i || k[1] == i {
			px.setBlocked(cut)
		}
	}
}

func (c *cluster) dataDir(i int) string { return c.hostFile(i).Workers[0].DataDir }

func (c *cluster) start(i int) {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("log-r%d.txt", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	args := append([]string{"-config", c.gen.HostFiles[i], "-log-level", "warn", "-journal-segment-bytes", strconv.Itoa(harnessSegmentBytes),
		"-admin-socket", c.admin[i]}, c.opts.hostArgs...)
	cmd := exec.Command(hostBinary, args...)
	cmd.Env = append(os.Environ(), c.env[i]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start replica-host r%d: %v", i, err)
	}
	logf.Close()
	c.procs[i] = cmd
}

// kill sends SIGKILL and reaps the process.
func (c *cluster) kill(i int) {
	c.t.Helper()
	p := c.procs[i]
	if p == nil {
		return
	}
	_ = p.Process.Signal(syscall.SIGKILL)
	_ = p.Wait()
	c.procs[i] = nil
}

func (c *cluster) shutdown() {
	for i := range c.procs {
		c.kill(i)
	}
	for _, px := range c.proxies {
		px.close()
	}
	if c.t.Failed() {
		for i := range c.peers {
			b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("log-r%d.txt", i)))
			lines := strings.Split(string(b), "\n")
			c.t.Logf("--- last log lines of r%d ---\n%s", i, strings.Join(lines[max(0, len(lines)-25):], "\n"))
		}
	}
}

// httpc reaches the hosts' TCP status listeners.
var httpc = &http.Client{Timeout: 5 * time.Second}

// adminClient reaches host i's admin socket; the URL's host is ignored.
func (c *cluster) adminClient(i int, timeout time.Duration) *http.Client {
	sock := c.admin[i]
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
}

func (c *cluster) statusOf(i int) (host.Status, error) {
	var st host.Status
	resp, err := c.adminClient(i, 5*time.Second).Get(fmt.Sprintf("http://r%d/v1/workers/%s/%s", i, volume, c.peers[i].ID))
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s: %v", what, timeout, err)
		}
		time.Sleep(25 * time.Millisecond) // polling interval of a deadline-bounded wait
	}
}

func (c *cluster) waitState(i int, want replica.State, timeout time.Duration) host.Status {
	c.t.Helper()
	var st host.Status
	eventually(c.t, timeout, fmt.Sprintf("replica r%d reaches %s", i, want), func() error {
		var err error
		st, err = c.statusOf(i)
		if err != nil {
			return err
		}
		if st.State != want {
			return fmt.Errorf("state %s (%s)", st.State, st.Reason)
		}
		return nil
	})
	return st
}

// waitLeader waits until one live replica is Raft leader and returns it.
func (c *cluster) waitLeader(timeout time.Duration) int {
	c.t.Helper()
	leader := -1
	eventually(c.t, timeout, "a coordinator is elected", func() error {
		for i := range c.peers {
			if c.procs[i] == nil {
				continue
			}
			if st, err := c.statusOf(i); err == nil && st.RaftState == "Leader" {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("no live replica reports Leader")
	})
	return leader
}

func (c *cluster) clientConfig() client.Config {
	c.t.Helper()
	cfg, err := client.LoadFile(c.gen.ClientFile)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg.AttemptTimeout = 2 * time.Second
	cfg.RetryBudget = 15 * time.Second
	cfg.DialTimeout = time.Second
	return cfg
}

func (c *cluster) client(cfg client.Config) *client.Client {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, cfg)
	if err != nil {
		c.t.Fatalf("client connects to the volume: %v", err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

func (c *cluster) digest(i int) (host.Digest, error) {
	var d host.Digest
	resp, err := c.adminClient(i, 5*time.Second).Get(fmt.Sprintf("http://r%d/v1/workers/%s/%s/digest", i, volume, c.peers[i].ID))
	if err != nil {
		return d, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return d, fmt.Errorf("digest: status %d: %s", resp.StatusCode, b)
	}
	return d, json.NewDecoder(resp.Body).Decode(&d)
}

// converged waits until the given replicas applied the same entries and hold
// identical state.
func (c *cluster) converged(timeout time.Duration, replicas ...int) {
	c.t.Helper()
	eventually(c.t, timeout, "replicas converge to identical state", func() error {
		var first host.Digest
		for k, i := range replicas {
			d, err := c.digest(i)
			if err != nil {
				return fmt.Errorf("r%d: %w", i, err)
			}
			if k == 0 {
				first = d
				continue
			}
			if d.Applied != first.Applied {
				return fmt.Errorf("r%d applied %d, r%d applied %d", replicas[0], first.Applied, i, d.Applied)
			}
			if d.Digest != first.Digest {
				return fmt.Errorf("replicas diverged at applied index %d: r%d %s, r%d %s", d.Applied, replicas[0], first.Digest, i, d.Digest)
			}
		}
		return nil
	})
}

func (c *cluster) post(i int, path string, body any) (int, string) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s%s", c.status[i], path), r)
	return c.do(req)
}

// do sends req; a /v1 request addressed to a host's status listener
// (c.status[i]) goes to that host's admin socket, where the admin API is
// served.
func (c *cluster) do(req *http.Request) (int, string) {
	c.t.Helper()
	hc := &http.Client{Timeout: 60 * time.Second}
	if strings.HasPrefix(req.URL.Path, "/v1/") {
		for i, addr := range c.status {
			if req.URL.Host == addr {
				hc = c.adminClient(i, 60*time.Second)
			}
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }
