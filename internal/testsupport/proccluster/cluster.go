package proccluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

// Volume is the name of every cluster's volume.
const Volume = "vol"

// Options describes a cluster. Its zero value is three replicas of 256 MiB
// with production's Raft timing: a test passes FastTiming explicitly.
type Options struct {
	Replicas int            // 3 when zero
	Capacity uint64         // the volume's bytes; 256 MiB when zero
	Timing   replica.Timing // as given: the zero value is production's
	// HostArgs are extra replica-host flags of every start (a later flag
	// overrides an earlier one).
	HostArgs []string
	// Configure edits replica i's host file before any process starts.
	// Cleanups it registers run after the processes are killed.
	Configure func(i int, f *host.StandaloneFile)
}

// Cluster is one volume served by one replica-host process per replica,
// each with its own data directory on loopback.
type Cluster struct {
	t          testing.TB
	bin        string
	opts       Options
	Dir        string   // the generated configuration, data and logs
	HostFiles  []string // per-replica standalone host files
	ClientFile string   // the generated client file
	// Config reaches the volume with the retry budgets of a mounted
	// volume's client; a test may change it before Dial.
	Config            client.Config
	CAFile, TokenFile string // the volume's trust material
	Endpoints         []client.Endpoint
	Status            []string // TCP status listeners: health, readiness, metrics, read-only status
	Admin             []string // admin API unix sockets: every /v1 request, mutations included
	// Env is extra environment of replica i's next start (fault hooks).
	Env    map[int][]string
	procs  []*exec.Cmd
	exited []chan struct{}
}

// Start generates the volume's configuration, starts every replica's
// process and returns without waiting for an election; everything is
// killed when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Capacity == 0 {
		o.Capacity = 256 << 20
	}
	c := &Cluster{t: t, bin: ReplicaHost(t), opts: o, Dir: t.TempDir(), Env: map[int][]string{},
		procs: make([]*exec.Cmd, o.Replicas), exited: make([]chan struct{}, o.Replicas)}
	c.generate()
	if o.Configure != nil {
		for i := range o.Replicas {
			f := c.HostFile(i)
			o.Configure(i, &f)
			c.WriteHostFile(i, f)
		}
	}
	t.Cleanup(c.shutdown)
	for i := range o.Replicas {
		c.Restart(i)
	}
	return c
}

// generate writes the volume's configuration and loads its client
// configuration.
func (c *Cluster) generate() {
	c.t.Helper()
	n := c.opts.Replicas
	// One range for both, so that the status ports cannot overlap the
	// workers' (two ranges, each free when chosen, could).
	base := FreePorts(c.t, 2*n)
	status := base + n
	g, err := standalone.Generate(standalone.GenerateOptions{Dir: c.Dir, Volume: Volume, Replicas: n, BasePort: base,
		StatusBasePort: status, Capacity: c.opts.Capacity, Timing: c.opts.Timing})
	if err != nil {
		c.t.Fatalf("generate the volume's configuration: %v", err)
	}
	c.HostFiles, c.ClientFile = g.HostFiles, g.ClientFile
	c.CAFile, c.TokenFile = filepath.Join(c.Dir, "ca.crt"), filepath.Join(c.Dir, "token")
	if c.Config, err = client.LoadFile(g.ClientFile); err != nil {
		c.t.Fatal(err)
	}
	c.Endpoints = c.Config.Endpoints
	c.Config.RetryBudget, c.Config.AttemptTimeout = 60*time.Second, 5*time.Second
	// A unix socket path is limited to 107 bytes: the admin sockets live
	// under a short directory of their own, not t.TempDir(), which is
	// named after the test.
	sockDir, err := os.MkdirTemp("", "rh-")
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { os.RemoveAll(sockDir) })
	for i := range n {
		c.Status = append(c.Status, fmt.Sprintf("127.0.0.1:%d", status+i))
		c.Admin = append(c.Admin, filepath.Join(sockDir, fmt.Sprintf("r%d.sock", i)))
	}
}

// HostFile reads replica i's host file.
func (c *Cluster) HostFile(i int) host.StandaloneFile {
	c.t.Helper()
	f, err := host.LoadStandalone(c.HostFiles[i])
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

// WriteHostFile replaces replica i's host file; its next start reads it.
func (c *Cluster) WriteHostFile(i int, f host.StandaloneFile) {
	c.t.Helper()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(c.HostFiles[i], b, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// Running reports whether replica i's process runs: started and neither
// killed nor exited of itself.
func (c *Cluster) Running(i int) bool {
	if c.procs[i] == nil {
		return false
	}
	select {
	case <-c.exited[i]:
		return false
	default:
		return true
	}
}

// Restart starts replica i's process from its data, unless it runs.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Running(i) {
		return
	}
	args := append([]string{"-config", c.HostFiles[i], "-log-level", "warn", "-admin-socket", c.Admin[i]}, c.opts.HostArgs...)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), c.Env[i]...)
	logf, err := os.OpenFile(c.logPath(i), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start replica-host r%d: %v", i, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.procs[i], c.exited[i] = cmd, done
}

// Kill stops replica i with SIGKILL and waits until it is gone.
func (c *Cluster) Kill(i int) {
	if c.procs[i] == nil {
		return
	}
	_ = c.procs[i].Process.Signal(syscall.SIGKILL)
	<-c.exited[i]
	c.procs[i] = nil
}

// Pid is replica i's process ID, 0 when it is not running.
func (c *Cluster) Pid(i int) int {
	if !c.Running(i) {
		return 0
	}
	return c.procs[i].Process.Pid
}

// shutdown stops every process when the test ends and, when it failed,
// logs the end of each host's log.
func (c *Cluster) shutdown() {
	for i := range c.procs {
		c.stop(i)
	}
	if c.t.Failed() {
		c.t.Log(c.Logs())
	}
}

// stop ends replica i at the end of a test: with SIGKILL, or with SIGTERM
// when the hosts write CPU profiles (host.CPUProfileEnv), since a profile is
// finished only by a clean stop.
func (c *Cluster) stop(i int) {
	if c.procs[i] == nil || os.Getenv(host.CPUProfileEnv) == "" {
		c.Kill(i)
		return
	}
	_ = c.procs[i].Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited[i]:
		c.procs[i] = nil
	case <-time.After(hostStopGrace):
		c.Kill(i)
	}
}

// hostStopGrace bounds a profiled host's clean stop.
const hostStopGrace = 30 * time.Second

func (c *Cluster) logPath(i int) string { return filepath.Join(c.Dir, fmt.Sprintf("host-r%d.log", i)) }

// logTail is how many of each host's last log lines Logs returns.
const logTail = 25

// Logs returns the end of each replica host's log, for failure messages.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for i := range c.procs {
		data, _ := os.ReadFile(c.logPath(i))
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		fmt.Fprintf(&b, "--- last log lines of r%d ---\n%s\n", i, strings.Join(lines[max(0, len(lines)-logTail):], "\n"))
	}
	return b.String()
}
