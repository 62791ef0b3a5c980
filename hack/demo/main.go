// Command demo is `make demo`: a replicated volume on this machine, end to
// end. It starts three replica-host processes on loopback (data under
// .demo/), the FUSE mount owner, mounts the 3-replica volume through the
// owner's socket, writes a workload with progress, kills the coordinator's
// process with SIGKILL, keeps writing through the failover, reads every byte
// back and checks it, then cleans up everything it started, also on Ctrl-C.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cellfleet/cellfleet/hack/internal/localvolume"
	"github.com/cellfleet/cellfleet/internal/replica/standalone"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding replica-host and csi-node")
	dir := flag.String("dir", ".demo", "working directory (removed at the end)")
	files := flag.Int("files", 24, "files written before the kill (and as many after), 1 to 1000")
	fileMiB := flag.Int("file-mib", 2, "size of each file in MiB, 1 to 64")
	flag.Parse()
	if *files < 1 || *files > 1000 || *fileMiB < 1 || *fileMiB > 64 {
		fmt.Fprintln(os.Stderr, "demo: --files must be 1 to 1000 and --file-mib 1 to 64")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := &demo{bin: *bin, files: *files, size: *fileMiB << 20}
	err := d.run(ctx, *dir)
	d.cleanup()
	switch {
	case ctx.Err() != nil:
		say("interrupted: everything the demo started is stopped and %s is removed", *dir)
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	bin         string
	files, size int
	dir, target string
	hosts       *localvolume.Hosts
	owner       *localvolume.Owner
}

func say(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func (d *demo) run(ctx context.Context, dir string) error {
	if os.Getuid() != 0 {
		return errors.New("the demo mounts a FUSE filesystem: run it as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("/dev/fuse is missing: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	d.dir = abs
	if err := os.RemoveAll(abs); err != nil {
		return err
	}
	say("generating a volume of 3 replicas (its own CA, certificates, bearer token) in %s", abs)
	g, err := localvolume.Generate(filepath.Join(abs, "volume"), "demo", 4<<30)
	if err != nil {
		return err
	}
	d.hosts = &localvolume.Hosts{Dir: abs, Bin: d.bin, Gen: g}
	for i := range g.HostFiles {
		if err := d.hosts.Start(i); err != nil {
			return err
		}
		say("replica-host r%d started (pid %d)", i, d.hosts.PID(i))
	}
	d.target = filepath.Join(abs, "mnt")
	d.owner = &localvolume.Owner{Dir: abs, Bin: d.bin, Target: d.target, ClientFile: g.ClientFile, Capacity: 4 << 30, Node: "demo-node"}
	if err := d.owner.Start(ctx); err != nil {
		return err
	}
	say("mount owner started (pid %d, socket %s)", d.owner.PID(), d.owner.Socket())
	if err := d.owner.Mount(ctx); err != nil {
		return err
	}
	say("volume mounted at %s (fuse.cellfleet, 3 replicas, quorum commit)", d.target)

	sums := map[string][32]byte{}
	if err := d.write(ctx, "before", sums); err != nil {
		return err
	}
	victim, err := standalone.Coordinator(ctx, g.ClientFile, 30*time.Second)
	if err != nil {
		return err
	}
	say("the coordinator is replica r%d (pid %d): kill -9", victim, d.hosts.PID(victim))
	d.hosts.Kill(victim)
	say("r%d is dead; the mount follows the new coordinator with the same retry identity", victim)
	if err := d.write(ctx, "after", sums); err != nil {
		return err
	}
	now, err := standalone.Coordinator(ctx, g.ClientFile, 30*time.Second)
	if err != nil {
		return err
	}
	say("the new coordinator is r%d; reading every file back", now)
	return d.verify(ctx, sums)
}

// write writes d.files files, each fsynced (committed on a quorum), with
// progress.
func (d *demo) write(ctx context.Context, phase string, sums map[string][32]byte) error {
	rng := rand.New(rand.NewPCG(uint64(len(sums)), 42))
	buf := make([]byte, d.size)
	start := time.Now()
	var slowest time.Duration
	for i := range d.files {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("%s-%03d.bin", phase, i)
		t0 := time.Now()
		if err := localvolume.WriteFileSync(filepath.Join(d.target, name), buf); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		slowest = max(slowest, time.Since(t0))
		sums[name] = sha256.Sum256(buf)
		mib := float64((i+1)*d.size) / (1 << 20)
		fmt.Printf("\r    %s the kill: %3d/%d files, %6.1f MiB, %6.1f MiB/s, slowest file %v   ",
			phase, i+1, d.files, mib, mib/time.Since(start).Seconds(), slowest.Round(time.Millisecond))
	}
	fmt.Println()
	return nil
}

func (d *demo) verify(ctx context.Context, sums map[string][32]byte) error {
	var total int64
	bad := 0
	for name, want := range sums {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		got, err := os.ReadFile(filepath.Join(d.target, name))
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		total += int64(len(got))
		if sha256.Sum256(got) != want {
			bad++
			fmt.Printf("    MISMATCH: %s\n", name)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d files differ from what was written", bad, len(sums))
	}
	say("every byte reads back intact: %d files, %.1f MiB, checked with SHA-256", len(sums), float64(total)/(1<<20))
	return nil
}

// cleanup unmounts, stops the owner and the replica hosts and removes the
// working directory.
func (d *demo) cleanup() {
	fmt.Println()
	if d.owner != nil {
		d.owner.Stop()
	}
	if d.hosts != nil {
		d.hosts.Stop()
	}
	if d.dir != "" {
		_ = os.RemoveAll(d.dir)
	}
	say("cleaned up: mount, mount owner and replica hosts stopped, %s removed", d.dir)
}
