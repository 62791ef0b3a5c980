package powercut_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/internal/testfs/powercut"
)

func mountT(t *testing.T) (*powercut.FS, string) {
	p := powercut.MountT(t)
	return p, p.Mountpoint()
}

func writeFile(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %s: %v", path, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, data string, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatalf("fsync %s: %v", path, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync directory %s: %v", dir, err)
	}
}

// contents is what a file holds after the cut; absent is "no such file".
const absent = "<absent>"

func contents(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return absent
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCutKeepsExactlyWhatWasSynced(t *testing.T) {
	type check struct{ name, want string }
	cases := []struct {
		name string
		// durable runs first and is fully synced (file and directory).
		durable func(t *testing.T, mnt string)
		act     func(t *testing.T, mnt string)
		want    []check
	}{
		{name: "a write without fsync is lost",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/f", "synced;", true) },
			act:     func(t *testing.T, mnt string) { appendFile(t, mnt+"/f", "unsynced", false) },
			want:    []check{{"f", "synced;"}}},
		{name: "a write with fsync survives",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/f", "synced;", true) },
			act:     func(t *testing.T, mnt string) { appendFile(t, mnt+"/f", "also synced", true) },
			want:    []check{{"f", "synced;also synced"}}},
		{name: "an overwrite in place without fsync reverts",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/f", "old contents", true) },
			act:     func(t *testing.T, mnt string) { writeFile(t, mnt+"/f", "new", false) },
			want:    []check{{"f", "old contents"}}},
		{name: "a truncate without fsync reverts",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/f", "0123456789", true) },
			act: func(t *testing.T, mnt string) {
				if err := os.Truncate(mnt+"/f", 3); err != nil {
					t.Fatal(err)
				}
			},
			want: []check{{"f", "0123456789"}}},
		{name: "a create whose file is synced but whose directory is not is lost",
			act:  func(t *testing.T, mnt string) { writeFile(t, mnt+"/new", "data", true) },
			want: []check{{"new", absent}}},
		{name: "a create with a directory fsync but no file fsync survives empty",
			act: func(t *testing.T, mnt string) {
				writeFile(t, mnt+"/new", "data", false)
				syncDir(t, mnt)
			},
			want: []check{{"new", ""}}},
		{name: "a create with file and directory fsync survives",
			act: func(t *testing.T, mnt string) {
				writeFile(t, mnt+"/new", "data", true)
				syncDir(t, mnt)
			},
			want: []check{{"new", "data"}}},
		{name: "a rename without directory fsync reverts",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/a", "A", true) },
			act: func(t *testing.T, mnt string) {
				if err := os.Rename(mnt+"/a", mnt+"/b"); err != nil {
					t.Fatal(err)
				}
			},
			want: []check{{"a", "A"}, {"b", absent}}},
		{name: "a rename with directory fsync survives",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/a", "A", true) },
			act: func(t *testing.T, mnt string) {
				if err := os.Rename(mnt+"/a", mnt+"/b"); err != nil {
					t.Fatal(err)
				}
				syncDir(t, mnt)
			},
			want: []check{{"a", absent}, {"b", "A"}}},
		{name: "an atomic replace without directory fsync keeps the old file",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/rec", "v1", true) },
			act: func(t *testing.T, mnt string) {
				writeFile(t, mnt+"/rec.tmp", "v2", true)
				if err := os.Rename(mnt+"/rec.tmp", mnt+"/rec"); err != nil {
					t.Fatal(err)
				}
			},
			want: []check{{"rec", "v1"}, {"rec.tmp", absent}}},
		{name: "an unlink without directory fsync reverts",
			durable: func(t *testing.T, mnt string) { writeFile(t, mnt+"/gone", "still here", true) },
			act: func(t *testing.T, mnt string) {
				if err := os.Remove(mnt + "/gone"); err != nil {
					t.Fatal(err)
				}
				// A new inode may reuse the unlinked one's number: it must
				// not take over the durable entry's contents.
				writeFile(t, mnt+"/sub/other", "other", true)
			},
			want: []check{{"gone", "still here"}, {"sub/other", absent}}},
		{name: "a file in a new directory needs the parent's fsync too",
			act: func(t *testing.T, mnt string) {
				if err := os.Mkdir(mnt+"/d", 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, mnt+"/d/f", "x", true)
				syncDir(t, mnt+"/d")
			},
			want: []check{{"d/f", absent}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, mnt := mountT(t)
			if err := os.Mkdir(mnt+"/sub", 0o755); err != nil {
				t.Fatal(err)
			}
			syncDir(t, mnt+"/sub")
			if tc.durable != nil {
				tc.durable(t, mnt)
			}
			syncDir(t, mnt)
			tc.act(t, mnt)
			if _, err := p.Cut(); err != nil {
				t.Fatalf("cut: %v", err)
			}
			for _, c := range tc.want {
				if got := contents(t, filepath.Join(mnt, c.name)); got != c.want {
					t.Errorf("after the cut %s holds %q, want %q", c.name, got, c.want)
				}
			}
		})
	}
}

func TestCutReportsWhatItDropped(t *testing.T) {
	p, mnt := mountT(t)
	writeFile(t, mnt+"/f", "synced", true)
	syncDir(t, mnt)
	appendFile(t, mnt+"/f", "unsynced", false)
	lost, err := p.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if lost.Pages != 1 || lost.Directories != 0 {
		t.Fatalf("cut reports %+v lost, want 1 page and no directory", lost)
	}
	lost, err = p.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if lost != (powercut.Lost{}) {
		t.Fatalf("a second cut with nothing written reports %+v lost", lost)
	}
}
