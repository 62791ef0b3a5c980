package mountpath_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cellfleet/cellfleet/internal/csi/mountpath"
)

func TestLocateAcceptsOnlyCleanPathsBeneathARoot(t *testing.T) {
	roots, err := mountpath.NewRoots("/var/lib/kubelet", "/run/consumer")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path     string
		wantRoot string
	}{
		{"/var/lib/kubelet/pods/x/volumes/v", "/var/lib/kubelet"},
		{"/run/consumer/lv-1", "/run/consumer"},
		{"/var/lib/kubelet", ""},
		{"/var/lib/kubelet/../etc", ""},
		{"/var/lib/kubelet/a/../b", ""},
		{"/var/lib/kubelet/a/", ""},
		{"/var/lib/kubelet//a", ""},
		{"var/lib/kubelet/a", ""},
		{"/var/lib/kubeletX/a", ""},
		{"/etc/passwd", ""},
		{"", ""},
		{"/var/lib/kubelet/a\x00b", ""},
	}
	for _, tc := range cases {
		root, _, err := roots.Locate(tc.path)
		if tc.wantRoot == "" {
			if !errors.Is(err, mountpath.ErrOutsideRoots) {
				t.Errorf("Locate(%q) must be refused as outside the roots, got root %q err %v", tc.path, root, err)
			}
			continue
		}
		if err != nil || root != tc.wantRoot {
			t.Errorf("Locate(%q) must find root %s, got %q %v", tc.path, tc.wantRoot, root, err)
		}
	}
}

func TestOpenDirRefusesSymlinksBeneathTheRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "rel-link")); err != nil {
		t.Fatal(err)
	}
	roots, _ := mountpath.NewRoots(root)
	for _, p := range []string{"link/t", "link", "rel-link", "rel-link/t"} {
		_, err := roots.OpenDir(filepath.Join(root, p), true)
		if !errors.Is(err, mountpath.ErrSymlink) && !errors.Is(err, mountpath.ErrNotDir) {
			t.Errorf("OpenDir(%s) must refuse the symlink, got %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "t")); !os.IsNotExist(err) {
		t.Fatalf("a refused path must not create anything behind the symlink (stat: %v)", err)
	}
	f, err := roots.OpenDir(filepath.Join(root, "real", "new"), true)
	if err != nil {
		t.Fatalf("OpenDir of a plain new directory must create it: %v", err)
	}
	f.Close()
}

func TestParseMountsUnescapesPaths(t *testing.T) {
	const info = `36 35 98:0 /mnt1 /mnt/with\040space rw,noatime master:1 - ext3 /dev/root rw,errors=continue
37 35 0:40 / /run/consumer/lv-1 rw shared:2 - fuse.cellfleet cellfleet:lv-1 rw
`
	ms, err := mountpath.ParseMounts(strings.NewReader(info))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].MountPoint != "/mnt/with space" || ms[0].Root != "/mnt1" || ms[1].FSType != "fuse.cellfleet" {
		t.Fatalf("mountinfo must parse with escapes undone, got %+v", ms)
	}
	if _, err := mountpath.ParseMounts(strings.NewReader("garbage\n")); err == nil {
		t.Fatalf("a malformed mountinfo line must be an error")
	}
}

func TestMountsOfFindsBindsOfADirectory(t *testing.T) {
	const info = `1 0 8:1 / / rw - ext4 /dev/sda1 rw
2 1 8:2 / /data rw - xfs /dev/sdb1 rw
3 1 8:2 /vols/lv-1 /var/lib/kubelet/pods/p/mount rw - xfs /dev/sdb1 rw
4 1 8:2 /vols/lv-1/sub /elsewhere rw - xfs /dev/sdb1 rw
5 1 8:2 /vols/lv-2 /consumer/lv-2 rw - xfs /dev/sdb1 rw
6 1 8:1 /vols/lv-1 /not-the-same-device rw - ext4 /dev/sda1 rw
`
	file := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(file, []byte(info), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := mountpath.MountsOf(file, "/data/vols/lv-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/var/lib/kubelet/pods/p/mount", "/elsewhere"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("mounts of /data/vols/lv-1 must be %v (same device, root inside the directory), got %v", want, got)
	}
}
