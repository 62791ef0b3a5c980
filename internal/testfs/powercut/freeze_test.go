package powercut_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cellfleet/cellfleet/internal/testsupport/poll"
)

// A frozen filesystem holds writes and fsyncs back without failing them,
// keeps answering reads, and lets everything through on Thaw.
func TestFreezeBlocksWritesAndSyncsUntilThaw(t *testing.T) {
	p, root := mountT(t)
	old := filepath.Join(root, "old")
	writeFile(t, old, "before", true)
	f, err := os.OpenFile(filepath.Join(root, "new"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syncDir(t, root) // the entry is durable; only the data crosses the freeze

	p.Freeze()
	done := make(chan error, 1)
	go func() {
		if _, err := f.WriteString("during"); err != nil {
			done <- err
			return
		}
		done <- f.Sync()
	}()
	poll.UntilTrue(t, 5*time.Second, "the write to the frozen filesystem never reached the gate", func() bool { return p.Blocked() == 1 })
	if got := contents(t, old); got != "before" {
		t.Fatalf("read of %s while frozen: %q, want %q", old, got, "before")
	}
	select {
	case err := <-done:
		t.Fatalf("write and fsync on a frozen filesystem returned (%v) before Thaw", err)
	default:
	}

	p.Thaw()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write and fsync after Thaw: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write and fsync still blocked 10s after Thaw")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := p.Blocked(); n != 0 {
		t.Fatalf("%d operations still blocked after Thaw", n)
	}
	if got := contents(t, filepath.Join(root, "new")); got != "during" {
		t.Fatalf("file written across the freeze holds %q, want %q", got, "during")
	}
	// What was synced once thawed survives a cut: the freeze delayed it,
	// it did not drop it.
	p.CutT(t)
	if got := contents(t, filepath.Join(root, "new")); got != "during" {
		t.Fatalf("after a cut the file synced across the freeze holds %q, want %q", got, "during")
	}
}

// Close releases operations blocked on a freeze, so a failed test leaves
// neither a blocked process nor a busy mount behind.
func TestCloseThawsAFrozenFilesystem(t *testing.T) {
	p, root := mountT(t)
	p.Freeze()
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644) }()
	poll.UntilTrue(t, 5*time.Second, "the create on the frozen filesystem never reached the gate", func() bool { return p.Blocked() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a create blocked on the freeze was not released by Close")
	}
	if err := <-closed; err != nil {
		t.Fatalf("close a frozen filesystem: %v", err)
	}
}

// Writes below a slowed directory are paced to its rate; writes
// elsewhere, and writes after SlowWrites(dir, 0), are not; what was
// written is kept.
func TestSlowWritesPacesDataWritesBelowItsDirectory(t *testing.T) {
	p, root := mountT(t)
	for _, d := range []string{"slow", "fast"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// 1 MiB at 4 MiB/s: at least 250 ms, whatever the kernel's request
	// sizes (the page cache may hold it, so the fsync waits for it).
	const rate, size = 4 << 20, 1 << 20
	const paced = time.Duration(size * int64(time.Second) / rate)
	data := strings.Repeat("x", size)
	took := func(path string) time.Duration {
		start := time.Now()
		writeFile(t, path, data, true)
		return time.Since(start)
	}
	p.SlowWrites("slow", rate)
	if d := took(filepath.Join(root, "slow", "f")); d < paced {
		t.Fatalf("1 MiB below the directory paced to 4 MiB/s took %s, want at least %s", d, paced)
	}
	if d := took(filepath.Join(root, "fast", "f")); d >= paced {
		t.Fatalf("1 MiB outside the slowed directory took %s, as paced", d)
	}
	p.SlowWrites("slow", 0)
	if d := took(filepath.Join(root, "slow", "g")); d >= paced {
		t.Fatalf("after SlowWrites(dir, 0) 1 MiB below it still took %s", d)
	}
	for _, f := range []string{"slow/f", "fast/f", "slow/g"} {
		if b, err := os.ReadFile(filepath.Join(root, f)); err != nil || string(b) != data {
			t.Fatalf("read %s back: %d bytes, %v", f, len(b), err)
		}
	}
}
