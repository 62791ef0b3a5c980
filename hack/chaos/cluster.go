package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
	"github.com/cellfleet/cellfleet/internal/testsupport/tcpproxy"
)

const replicas = 3

// cluster is the three replica-host processes, their disks and the raft
// routes between them (every route through its own proxy).
type cluster struct {
	dir     string
	bin     string
	gen     standalone.Generated
	status  []string // status listeners (readyz)
	hosts   *localvolume.Hosts
	disks   []*disk
	proxies map[[2]int]*tcpproxy.Proxy // [from, to]
}

func (c *cluster) setup(diskMiB int) error {
	var err error
	c.gen, err = localvolume.Generate(filepath.Join(c.dir, "volume"), "chaos", 4<<30)
	if err != nil {
		return err
	}
	c.hosts = &localvolume.Hosts{Dir: c.dir, Bin: c.bin, Gen: c.gen}
	c.proxies = map[[2]int]*tcpproxy.Proxy{}
	var real []replica.Peer
	for i := range replicas {
		f, err := host.LoadStandalone(c.gen.HostFiles[i])
		if err != nil {
			return err
		}
		real = append(real, f.Workers[0].Self)
		c.status = append(c.status, f.StatusListen)
	}
	for i := range replicas {
		d, err := newDisk(filepath.Join(c.dir, fmt.Sprintf("disk-r%d", i)), diskMiB)
		c.disks = append(c.disks, d)
		if err != nil {
			return err
		}
		f, err := host.LoadStandalone(c.gen.HostFiles[i])
		if err != nil {
			return err
		}
		f.Workers[0].DataDir = filepath.Join(d.mnt, "data")
		f.StateDir = filepath.Join(d.mnt, "state")
		// Host i reaches peer j through proxy (i, j): a partition blocks
		// both directions of a pair.
		for k, p := range f.Workers[0].Peers {
			j := peerIndex(real, p.ID)
			px, err := tcpproxy.New(real[j].Address)
			if err != nil {
				return err
			}
			c.proxies[[2]int{i, j}] = px
			f.Workers[0].Peers[k].Address = px.Addr()
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.gen.HostFiles[i], b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func peerIndex(peers []replica.Peer, id string) int {
	for i, p := range peers {
		if p.ID == id {
			return i
		}
	}
	return -1
}

func (c *cluster) start(i int) error {
	// The admin socket defaults to the state directory, which is on the
	// power-cut filesystem: FUSE cannot hold a unix socket.
	return c.hosts.Start(i, "-admin-socket", filepath.Join(c.dir, fmt.Sprintf("admin-r%d.sock", i)))
}

func (c *cluster) kill(i int) { c.hosts.Kill(i) }

func (c *cluster) pid(i int) int { return c.hosts.PID(i) }

// ready asks host i's worker reports: every worker runs as a healthy
// member. (/readyz says only whether the host takes work:
// docs/decisions/0011-node-leases.md.)
func (c *cluster) ready(ctx context.Context, i int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.status[i]+"/v1/workers", nil)
	if err != nil {
		return false
	}
	cl := &http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var sts []host.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&sts) != nil || len(sts) == 0 {
		return false
	}
	for _, st := range sts {
		if st.State != replica.ReplicaStateRunning || !st.Healthy {
			return false
		}
	}
	return true
}

func (c *cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	return localvolume.WaitFor(ctx, timeout, func() bool {
		for i := range replicas {
			if !c.ready(ctx, i) {
				return false
			}
		}
		return true
	})
}

// coordinator asks the volume which replica coordinates.
func (c *cluster) coordinator(ctx context.Context) (int, error) {
	i, err := standalone.Coordinator(ctx, c.gen.ClientFile, 10*time.Second)
	if err == nil && (i < 0 || i >= replicas) {
		return 0, fmt.Errorf("coordinator r%d is not one of r0..r%d", i, replicas-1)
	}
	return i, err
}

// partition cuts (or heals) both directions between hosts a and b.
func (c *cluster) partition(a, b int, cut bool) {
	for _, k := range [][2]int{{a, b}, {b, a}} {
		if px := c.proxies[k]; px != nil {
			px.SetBlocked(cut)
		}
	}
}

func (c *cluster) healAll() {
	for _, px := range c.proxies {
		px.SetBlocked(false)
	}
	for _, d := range c.disks {
		if d.pc != nil {
			d.pc.Thaw()
		}
		_ = d.drain()
	}
}

func (c *cluster) shutdown() {
	c.hosts.Stop()
	for _, px := range c.proxies {
		px.Close()
	}
	for _, d := range c.disks {
		if d != nil {
			d.close()
		}
	}
}
