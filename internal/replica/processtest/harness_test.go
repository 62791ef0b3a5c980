package processtest

// The harness: a volume of replica-host processes (proccluster), with what
// only these tests need on top: fault-injecting proxies between the
// workers, a data directory per replica on a disk of the test's choice, and
// the status, digest and admin requests the tests check.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
	"github.com/cellfleet/cellfleet/internal/testsupport/proccluster"
	"github.com/cellfleet/cellfleet/internal/testsupport/tcpproxy"
)

const volume = proccluster.Volume

// harnessSegmentBytes is the journal segment size the hosts run with: small
// enough that tests roll and compact segments.
const harnessSegmentBytes = 4 << 20

func TestMain(m *testing.M) {
	code := m.Run()
	proccluster.RemoveBinaries()
	os.Exit(code)
}

type clusterOpts struct {
	replicas int
	proxied  bool           // route worker-to-worker traffic through fault-injecting proxies
	timing   replica.Timing // proccluster.FastTiming when zero
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
	*proccluster.Cluster
	t       testing.TB
	opts    clusterOpts
	peers   []replica.Peer // real addresses
	proxies map[[2]int]*tcpproxy.Proxy
}

func startCluster(t testing.TB, o clusterOpts) *cluster {
	t.Helper()
	if o.timing == (replica.Timing{}) {
		o.timing = proccluster.FastTiming
	}
	c := &cluster{t: t, opts: o, proxies: map[[2]int]*tcpproxy.Proxy{}}
	// Registered before the processes start, so it runs after they are
	// killed.
	t.Cleanup(c.closeProxies)
	hostArgs := append([]string{"-journal-segment-bytes", strconv.Itoa(harnessSegmentBytes)}, o.hostArgs...)
	c.Cluster = proccluster.Start(t, proccluster.Options{Replicas: o.replicas, Capacity: o.capacity, Timing: o.timing,
		HostArgs: hostArgs, Configure: c.configure})
	for i := range c.HostFiles {
		c.peers = append(c.peers, c.HostFile(i).Workers[0].Self)
	}
	c.waitLeader(20 * time.Second)
	return c
}

// configure applies the options to replica i's host file.
func (c *cluster) configure(i int, f *host.StandaloneFile) {
	if c.opts.maxSessions > 0 {
		f.Workers[0].MaxSessions = c.opts.maxSessions
	}
	if c.opts.disk != nil {
		root := c.opts.disk(c.t, i)
		f.Workers[0].DataDir = filepath.Join(root, "data")
		f.StateDir = filepath.Join(root, "state")
	}
	if c.opts.configure != nil {
		c.opts.configure(i, f)
	}
	if c.opts.proxied {
		c.insertProxies(i, f)
	}
}

// insertProxies points replica i's route to every peer at its own proxy.
func (c *cluster) insertProxies(i int, f *host.StandaloneFile) {
	for k, p := range f.Workers[0].Peers {
		var j int
		if _, err := fmt.Sscanf(p.ID, "r%d", &j); err != nil {
			c.t.Fatalf("replica ID %q: %v", p.ID, err)
		}
		px, err := tcpproxy.New(p.Address)
		if err != nil {
			c.t.Fatal(err)
		}
		c.proxies[[2]int{i, j}] = px
		f.Workers[0].Peers[k].Address = px.Addr()
	}
}

func (c *cluster) closeProxies() {
	for _, px := range c.proxies {
		px.Close()
	}
}

// isolate cuts every link to and from replica i; heal restores them.
func (c *cluster) isolate(i int, cut bool) {
	for k, px := range c.proxies {
		if k[0] == i || k[1] == i {
			px.SetBlocked(cut)
		}
	}
}

func (c *cluster) dataDir(i int) string { return c.HostFile(i).Workers[0].DataDir }

// httpc reaches the hosts' TCP status listeners.
var httpc = &http.Client{Timeout: 5 * time.Second}

func (c *cluster) waitState(i int, want replica.State, timeout time.Duration) host.Status {
	c.t.Helper()
	var st host.Status
	poll.Until(c.t, timeout, fmt.Sprintf("replica r%d reaches %s", i, want), func() error {
		var err error
		st, err = c.ReplicaStatus(i)
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
	poll.Until(c.t, timeout, "a coordinator is elected", func() error {
		for i := range c.peers {
			if !c.Running(i) {
				continue
			}
			if st, err := c.ReplicaStatus(i); err == nil && st.RaftState == "Leader" {
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
	cfg, err := client.LoadFile(c.ClientFile)
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
	resp, err := c.AdminClient(i, 5*time.Second).Get(fmt.Sprintf("http://r%d/v1/workers/%s/%s/digest", i, volume, c.peers[i].ID))
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
	poll.Until(c.t, timeout, "replicas converge to identical state", func() error {
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
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s%s", c.Status[i], path), r)
	return c.do(req)
}

// do sends req; a /v1 request addressed to a host's status listener
// (c.Status[i]) goes to that host's admin socket, where the admin API is
// served.
func (c *cluster) do(req *http.Request) (int, string) {
	c.t.Helper()
	hc := &http.Client{Timeout: 60 * time.Second}
	if strings.HasPrefix(req.URL.Path, "/v1/") {
		for i, addr := range c.Status {
			if req.URL.Host == addr {
				hc = c.AdminClient(i, 60*time.Second)
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
