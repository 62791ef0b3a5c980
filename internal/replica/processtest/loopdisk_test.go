package processtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/testfs/memdir"
)

// loopDisk makes an ext4 file system of exactly size bytes on a loop
// device, mounted at a new directory, and returns the mount point. Cleanup
// unmounts it and detaches the device, also when the test fails; cleanups
// registered later (the cluster's processes) run first.
func loopDisk(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop-mounted disks need root")
	}
	for _, tool := range []string{"mkfs.ext4", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("loop-mounted disks need %s: %v", tool, err)
		}
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(imageDir(t), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	// -m 0: root could otherwise write into the reserved blocks and the
	// disk would be larger than stated for the replica-host running as root.
	run(t, "mkfs.ext4", "-q", "-F", "-m", "0", img)
	dev := run(t, "losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detach %s: %v: %s", dev, err, out)
		}
	})
	run(t, "mount", dev, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

// imageDir is a new directory for a disk image, in memory where the machine
// allows (memdir): the file system on the image is still ext4 of exactly the
// stated size, but the gigabytes a replica writes through it no longer queue
// on the machine's disk behind (and ahead of) every other test's writes; CI
// saw the writeback of a rewrite test starve elections here and an API
// server's start in a package running beside it. It is removed after the
// device is detached.
func imageDir(t *testing.T) string {
	t.Helper()
	dir, err := memdir.MkdirTemp("cellfleet-loopdisk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
