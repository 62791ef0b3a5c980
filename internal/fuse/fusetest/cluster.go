// Package fusetest runs a replicated volume for tests and benchmarks: three
// real replica-host processes on loopback, each with its own data directory,
// killed with SIGKILL and restarted on demand. It is test support for the
// FUSE and mount owner packages; production code must never import it.
package fusetest

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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica"
	"github.com/cellfleet/cellfleet/internal/replica/client"
	"github.com/cellfleet/cellfleet/internal/replica/host"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

// Build compiles the module's package pkg (e.g. "cmd/replica-host") into dir
// and returns the binary's path.
func Build(dir, pkg string) (string, error) {
	return BuildPackage(dir, "github.com/cellfleet/cellfleet/"+pkg)
}

// BuildPackage builds the command at importPath (of this module or one it
// requires, such as go-fuse's loopback example) into dir.
func BuildPackage(dir, importPath string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(importPath))
	cmd := exec.Command("go", "build", "-o", bin, importPath)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s: %w", importPath, err)
	}
	return bin, nil
}

// FastTiming makes elections take a fraction of a second.
var FastTiming = replica.Timing{HeartbeatTimeout: 300 * time.Millisecond,
	ElectionTimeout: 300 * time.Millisecond, LeaderLeaseTimeout: 150 * time.Millisecond}

// Cluster is one volume served by three replica-host processes.
type Cluster struct {
	t      testing.TB
	bin    string
	Dir    string
	Files  []string // per-replica standalone host configs
	procs  []*exec.Cmd
	exited []chan struct{}
	// Config reaches the volume (volume "vol").
	Config client.Config
	// CAFile and TokenFile hold the volume's trust material.
	CAFile, TokenFile string
	Endpoints         []client.Endpoint
	// Status holds each replica host's status listener (host:port).
	Status []string
	// Admin holds each replica host's admin API unix socket (mutations such
	// as Checkpoint are served only there).
	Admin []string
}

// Start starts a three-replica volume of the given capacity with the
// replica-host binary bin and FastTiming; everything is killed in Cleanup.
func Start(t testing.TB, bin string, capacity uint64) *Cluster {
	t.Helper()
	return StartWithTiming(t, bin, capacity, FastTiming)
}

// StartWithTiming is Start with the given Raft timing (the zero value is
// what a production host runs with: hashicorp/raft's defaults).
func StartWithTiming(t testing.TB, bin string, capacity uint64, timing replica.Timing) *Cluster {
	t.Helper()
	dir := t.TempDir()
	base, status := freePortRange(t, 3), freePortRange(t, 3)
	g, err := standalone.Generate(standalone.GenerateOptions{Dir: dir, Volume: "vol", Replicas: 3, BasePort: base,
		StatusBasePort: status, Capacity: capacity, Timing: timing})
	if err != nil {
		t.Fatalf("generate the volume's configuration: %v", err)
	}
	c := &Cluster{t: t, bin: bin, Dir: dir, Files: g.HostFiles,
		CAFile: filepath.Join(dir, "ca.crt"), TokenFile: filepath.Join(dir, "token")}
	c.Config, err = client.LoadFile(g.ClientFile)
	if err != nil {
		t.Fatal(err)
	}
	c.Endpoints = c.Config.Endpoints
	for i := range 3 {
		c.Status = append(c.Status, fmt.Sprintf("127.0.0.1:%d", status+i))
	}
	c.Config.RetryBudget = 60 * time.Second
	c.Config.AttemptTimeout = 5 * time.Second
	// A unix socket path is limited to 107 bytes: keep the admin sockets
	// under a short directory of their own rather than the test's.
	sockDir, err := os.MkdirTemp("", "fa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	for i := range 3 {
		c.Admin = append(c.Admin, filepath.Join(sockDir, fmt.Sprintf("r%d.sock", i)))
	}
	c.procs = make([]*exec.Cmd, 3)
	c.exited = make([]chan struct{}, 3)
	t.Cleanup(func() {
		for i := range c.procs {
			c.stop(i)
		}
	})
	for i := range 3 {
		c.Restart(i)
	}
	return c
}

func freePortRange(t testing.TB, n int) int {
	t.Helper()
	base, err := standalone.FreePortRange(n)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// Restart starts replica i's process (after Kill, from its data).
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.procs[i] != nil {
		return
	}
	cmd := exec.Command(c.bin, "-config", c.Files[i], "-log-level", "warn", "-admin-socket", c.Admin[i])
	logf, err := os.OpenFile(filepath.Join(c.Dir, fmt.Sprintf("host-r%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start replica-host r%d: %v", i, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
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

// Pause stops replica i's process with SIGSTOP: a host that is alive but
// answers nothing, as behind a partition or a stalled disk. Unlike Kill and
// Restart it forks nothing, so a test that holds files open on a mount may
// heal it with Resume while writes are queued (a fork's exec closes the
// test's descriptors, and each close waits for their commits).
// Pause returns once the process is stopped, since a signal is delivered
// asynchronously.
func (c *Cluster) Pause(i int) {
	if c.procs[i] == nil {
		return
	}
	pid := c.procs[i].Process.Pid
	_ = c.procs[i].Process.Signal(syscall.SIGSTOP)
	WaitFor(c.t, fmt.Sprintf("replica-host r%d (pid %d) to stop", i, pid), 10*time.Second, func() bool {
		return processState(pid) == 'T'
	})
}

// processState is the state letter of /proc/<pid>/stat (R, S, D, T, ...),
// or 0 when it cannot be read.
func processState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) == 0 || len(f[0]) == 0 {
		return 0
	}
	return f[0][0]
}

// Resume continues replica i after Pause.
func (c *Cluster) Resume(i int) {
	if c.procs[i] != nil {
		_ = c.procs[i].Process.Signal(syscall.SIGCONT)
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

// CPU returns the processor time (user and system) the running replica
// processes have used so far.
func (c *Cluster) CPU() time.Duration {
	var total time.Duration
	for _, p := range c.procs {
		if p != nil {
			total += ProcessCPU(p.Process.Pid)
		}
	}
	return total
}

// ProcessCPU is the processor time (user and system) a running process has
// used so far; 0 once it is gone.
func ProcessCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at
	// state; utime and stime are fields 14 and 15, in clock ticks
	// (USER_HZ, 100 on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// Dial connects a client to the volume.
func (c *Cluster) Dial(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.Config)
	if err != nil {
		t.Fatalf("connect to the volume: %v\n%s", err, c.Logs())
	}
	return cl
}

// Coordinator returns the index of the replica coordinating now.
func (c *Cluster) Coordinator(t testing.TB) int {
	t.Helper()
	cl := c.Dial(t)
	defer cl.Close()
	if _, err := cl.StatFs(context.Background()); err != nil {
		t.Fatalf("statfs to find the coordinator: %v", err)
	}
	var i int
	if _, err := fmt.Sscanf(cl.Coordinator(), "r%d", &i); err != nil || i < 0 || i > 2 {
		t.Fatalf("unexpected replica ID %q", cl.Coordinator())
	}
	return i
}

// KillCoordinator kills the coordinating replica's process and returns its
// index.
func (c *Cluster) KillCoordinator(t testing.TB) int {
	t.Helper()
	i := c.Coordinator(t)
	c.Kill(i)
	return i
}

// ReplicaStatus reads replica i's worker status from its host.
func (c *Cluster) ReplicaStatus(i int) (host.Status, error) {
	var st host.Status
	resp, err := statusClient.Get(fmt.Sprintf("http://%s/v1/workers/vol/r%d", c.Status[i], i))
	if err != nil {
		return st, fmt.Errorf("status of r%d: %w", i, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return st, fmt.Errorf("status of r%d: HTTP %d: %s", i, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("status of r%d: %w", i, err)
	}
	return st, nil
}

var statusClient = &http.Client{Timeout: 5 * time.Second}

// WaitCaughtUp waits until replica i (restarted) follows a coordinator
// again and has applied everything the coordinator had committed when i
// came back: from then on the volume keeps its quorum if another replica
// dies.
func (c *Cluster) WaitCaughtUp(t testing.TB, i int, timeout time.Duration) {
	t.Helper()
	var target uint64 // the coordinator's commit index once i runs
	deadline := time.Now().Add(timeout)
	for {
		err := c.caughtUp(i, &target)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica r%d did not catch up within %s: %v", i, timeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a deadline-bounded wait
	}
}

// caughtUp reports why replica i has not caught up with *target yet,
// sampling the coordinator's commit index into *target once i runs.
func (c *Cluster) caughtUp(i int, target *uint64) error {
	st, err := c.ReplicaStatus(i)
	if err != nil {
		return err
	}
	if st.State != replica.ReplicaStateRunning || st.RaftState != "Follower" {
		return fmt.Errorf("r%d is %s/%s", i, st.State, st.RaftState)
	}
	for j := range c.procs {
		if *target != 0 {
			break
		}
		if j == i || c.procs[j] == nil {
			continue
		}
		if lt, err := c.ReplicaStatus(j); err == nil && lt.RaftState == "Leader" {
			*target = lt.CommitIndex
		}
	}
	if *target == 0 {
		return fmt.Errorf("no coordinator to compare r%d with", i)
	}
	if st.AppliedIndex < *target {
		return fmt.Errorf("r%d applied %d of %d", i, st.AppliedIndex, *target)
	}
	return nil
}

// Logs returns the start of each replica host's log, for failure messages.
func (c *Cluster) Logs() string {
	var b strings.Builder
	for i := range 3 {
		f, err := os.Open(filepath.Join(c.Dir, fmt.Sprintf("host-r%d.log", i)))
		if err != nil {
			continue
		}
		data, _ := io.ReadAll(io.LimitReader(f, 8<<10))
		f.Close()
		fmt.Fprintf(&b, "--- r%d ---\n%s\n", i, data)
	}
	return b.String()
}

// Checkpoint makes replica i take a checkpoint now, through its host's
// admin API.
func (c *Cluster) Checkpoint(t testing.TB, i int) {
	t.Helper()
	sock := c.Admin[i]
	admin := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	resp, err := admin.Post(fmt.Sprintf("http://r%d/v1/workers/vol/r%d/checkpoint", i, i), "application/json", nil)
	if err != nil {
		t.Fatalf("checkpoint r%d: %v", i, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		t.Fatalf("checkpoint r%d: %s %s", i, resp.Status, body)
	}
}

// Metrics returns replica host i's Prometheus exposition.
func (c *Cluster) Metrics(t testing.TB, i int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", c.Status[i]))
	if err != nil {
		t.Fatalf("metrics of r%d: %v", i, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics of r%d: %v", i, err)
	}
	return string(body)
}

// WaitFor polls cond until it holds or the deadline passes.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
