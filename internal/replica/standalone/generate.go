// Package standalone writes everything a loopback volume needs to run with
// no Kubernetes (replica-host init-standalone, the demo, the process and
// FUSE tests): the volume's CA and replica certificates from pki, a token,
// the host configurations and the client configuration. It lives apart from
// the host, whose doc comment keeps it free of the client.
package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/pki"
)

// GenerateOptions describes a loopback volume for init-standalone.
type GenerateOptions struct {
	Dir            string
	Volume         string
	Replicas       int
	BasePort       int // worker i listens on BasePort+i
	StatusBasePort int // host i serves status on StatusBasePort+i
	// Ports and StatusPorts, when set, give each replica's ports
	// explicitly instead of BasePort+i and StatusBasePort+i.
	Ports       []int
	StatusPorts []int
	Capacity    uint64
	Timing      replica.Timing
}

func (o GenerateOptions) port(i int) int {
	if len(o.Ports) > i {
		return o.Ports[i]
	}
	return o.BasePort + i
}

func (o GenerateOptions) statusPort(i int) int {
	if len(o.StatusPorts) > i {
		return o.StatusPorts[i]
	}
	return o.StatusBasePort + i
}

// Generated lists what Generate wrote.
type Generated struct {
	HostFiles  []string // one standalone file per replica (one process each)
	SingleHost string   // one standalone file hosting every replica
	ClientFile string
}

// Generate writes a CA, certificates, a token, standalone host configs and
// a client config for a volume of opt.Replicas replicas on 127.0.0.1.
func Generate(opt GenerateOptions) (Generated, error) {
	var g Generated
	if opt.Replicas < 1 || opt.Replicas > 5 {
		return g, fmt.Errorf("replicas must be 1 to 5, got %d", opt.Replicas)
	}
	if opt.Volume == "" || opt.Dir == "" || opt.port(0) <= 0 || opt.statusPort(0) <= 0 {
		return g, errors.New("dir, volume, base port and status base port are required")
	}
	dir, err := filepath.Abs(opt.Dir)
	if err != nil {
		return g, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return g, err
	}
	ca, err := pki.NewCA(opt.Volume, 10*365*24*time.Hour)
	if err != nil {
		return g, err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM, "token": []byte(pki.NewToken() + "\n")}
	var peers []replica.Peer
	for i := 0; i < opt.Replicas; i++ {
		id := fmt.Sprintf("r%d", i)
		p := replica.Peer{ID: id, Address: fmt.Sprintf("127.0.0.1:%d", opt.port(i)),
			ServerName: fmt.Sprintf("%s-%s.replicas.cellfleet.local", opt.Volume, id)}
		peers = append(peers, p)
		c, k, err := ca.Issue([]string{p.ServerName}, 10*365*24*time.Hour)
		if err != nil {
			return g, err
		}
		files[id+".crt"], files[id+".key"] = c, k
	}
	var all []host.WorkerSpec
	for i, p := range peers {
		others := append(append([]replica.Peer{}, peers[:i]...), peers[i+1:]...)
		spec := host.WorkerSpec{Volume: opt.Volume, Replica: p.ID, Generation: 1, Listen: p.Address, Self: p,
			Peers: others, Bootstrap: i == 0, DataDir: filepath.Join(dir, "data-"+p.ID), CapacityBytes: opt.Capacity,
			CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, p.ID+".crt"),
			KeyFile: filepath.Join(dir, p.ID+".key"), TokenFile: filepath.Join(dir, "token"), Timing: opt.Timing}
		all = append(all, spec)
		hf := host.StandaloneFile{StateDir: filepath.Join(dir, "state-"+p.ID),
			StatusListen: fmt.Sprintf("127.0.0.1:%d", opt.statusPort(i)), Workers: []host.WorkerSpec{spec}}
		name := "host-" + p.ID + ".json"
		if files[name], err = json.MarshalIndent(hf, "", "  "); err != nil {
			return g, err
		}
		g.HostFiles = append(g.HostFiles, filepath.Join(dir, name))
	}
	single := host.StandaloneFile{StateDir: filepath.Join(dir, "state"), StatusListen: fmt.Sprintf("127.0.0.1:%d", opt.statusPort(0)), Workers: all}
	if files["host.json"], err = json.MarshalIndent(single, "", "  "); err != nil {
		return g, err
	}
	g.SingleHost = filepath.Join(dir, "host.json")
	var eps []client.Endpoint
	for _, p := range peers {
		eps = append(eps, client.Endpoint{ID: p.ID, Address: p.Address, ServerName: p.ServerName})
	}
	cf := client.File{Volume: opt.Volume, Endpoints: eps, CAFile: filepath.Join(dir, "ca.crt"), TokenFile: filepath.Join(dir, "token")}
	if files["client.json"], err = json.MarshalIndent(cf, "", "  "); err != nil {
		return g, err
	}
	g.ClientFile = filepath.Join(dir, "client.json")
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return g, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return g, nil
}
