package local_test

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestTargetPathTricksAreRefused: traversal, relative paths, paths outside
// the roots and symlinks anywhere beneath the root are InvalidArgument and
// mount nothing anywhere.
func TestTargetPathTricksAreRefused(t *testing.T) {
	f := newFixture(t)
	id := f.create(t, "paths")
	outside := filepath.Join(f.base, "outside")
	mkdir(t, outside)
	if err := os.Symlink(outside, filepath.Join(f.pods, "link-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.pods, "link-target")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.consumer, "link-consumer")); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, target string }{
		{"dot-dot escaping the kubelet dir", f.pods + "/../../outside/t"},
		{"dot-dot that cleans to inside the root", f.pods + "/a/../t"},
		{"relative path", "kubelet/pods/t"},
		{"path outside every root", filepath.Join(outside, "t")},
		{"the root itself", filepath.Join(f.base, "kubelet")},
		{"symlinked parent directory", filepath.Join(f.pods, "link-dir", "t")},
		{"symlink as the target", filepath.Join(f.pods, "link-target")},
		{"symlink beneath the consumer root", filepath.Join(f.consumer, "link-consumer")},
		{"trailing slash", f.pods + "/t/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectCode(t, "NodePublishVolume to "+tc.target, f.publish(id, tc.target, "h"), codes.InvalidArgument)
			expectCode(t, "NodeUnpublishVolume of "+tc.target, f.unpublish(id, tc.target), codes.InvalidArgument)
			if mounted(t, outside) {
				t.Fatalf("a refused path must not mount the volume at the symlink's destination")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.base, "state", "publications", id+".json")); !os.IsNotExist(err) {
		t.Fatalf("a refused path beneath the consumer root must not leave a publication record (stat: %v)", err)
	}
}
