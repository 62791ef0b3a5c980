package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

const testRef = "localhost/cellfleet/hello:1"

// archs are the platforms make images builds, with the ELF machine each
// platform's binary must be.
var archs = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// helloBinaries cross-compiles a tiny static program for every platform the
// way hack/cluster/images.sh builds the real ones (CGO_ENABLED=0, GOARCH),
// into dir/<arch>/hello, and returns the --binary flags naming them.
func helloBinaries(t *testing.T, dir string) []string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "hello")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src, "go.mod"), "module hello\n\ngo 1.26.0\n")
	write(t, filepath.Join(src, "main.go"), "package main\n\nfunc main() { println(\"hello\") }\n")
	var flags []string
	for _, arch := range slices.Sorted(maps.Keys(archs)) {
		out := filepath.Join(dir, arch, "hello")
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s", "-o", out, ".")
		build.Dir = src
		build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("cross-compile hello for %s: %v\n%s", arch, err, b)
		}
		flags = append(flags, "--binary", "linux/"+arch+"="+out)
	}
	return flags
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mkimage runs the command as images.sh does and returns its output line.
func mkimage(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("mkimage %q: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

func fileSHA(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestDigestIsReproducible: two builds of the same binaries, copied to other
// paths with other modification times and permissions (as two checkouts or
// two CI runs would have them), give the same digest and byte-identical
// archives; a changed label gives another digest, so the digest does depend
// on the image.
func TestDigestIsReproducible(t *testing.T) {
	dir := t.TempDir()
	first := helloBinaries(t, filepath.Join(dir, "a"))
	// The second copy: same bytes, another path, mode and mtime.
	var second []string
	for i := 1; i < len(first); i += 2 {
		plat, path, _ := strings.Cut(first[i], "=")
		cp := filepath.Join(dir, "b", strings.TrimPrefix(plat, "linux/"), "hello")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(cp), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp, b, 0o700); err != nil {
			t.Fatal(err)
		}
		old := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
		if err := os.Chtimes(cp, old, old); err != nil {
			t.Fatal(err)
		}
		second = append(second, "--binary", plat+"="+cp)
	}
	flags := []string{"--user", "65532:65532", "--label", "dev.eric.cellfleet.build=1"}
	outA, outB := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	lineA := mkimage(t, slices.Concat(flags, first, []string{testRef, outA})...)
	time.Sleep(1100 * time.Millisecond) // a build a second later: a wall-clock time in the image would show
	lineB := mkimage(t, slices.Concat(flags, second, []string{testRef, outB})...)
	if lineA != lineB {
		t.Fatalf("two builds of the same binaries printed different digests:\n%s%s", lineA, lineB)
	}
	if fileSHA(t, outA) != fileSHA(t, outB) {
		t.Fatalf("two builds of the same binaries wrote different archives (same digest line %q)", lineA)
	}
	if !strings.HasPrefix(lineA, testRef+" sha256:") || len(strings.TrimSpace(lineA)) != len(testRef)+1+7+64 {
		t.Fatalf("output %q is not \"REF sha256:<64 hex>\"", lineA)
	}
	lineC := mkimage(t, slices.Concat([]string{"--user", "65532:65532", "--label", "dev.eric.cellfleet.build=2"}, first, []string{testRef, filepath.Join(dir, "c.tar")})...)
	if lineC == lineA {
		t.Fatalf("a different label gave the same digest %q", lineA)
	}
}

// TestArchiveCarriesConfigAndPlatforms reads an archive back as containerd
// would: index.json names the image through io.containerd.image.name and
// points at an image index with linux/amd64 and linux/arm64; each platform's
// config carries the entrypoint, user, labels and its architecture, and its
// layer holds that platform's binary (an ELF of that machine) with
// /etc/passwd naming the user.
func TestArchiveCarriesConfigAndPlatforms(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "hello.tar")
	line := mkimage(t, slices.Concat([]string{"--user", "65532:65532", "--label", "k=v"}, helloBinaries(t, dir),
		[]string{testRef, out, "--flag", "arg"})...)
	lay := filepath.Join(dir, "layout")
	untar(t, out, lay)

	top, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatalf("archive is not an OCI image layout: %v", err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("index.json lists %d entries, want the one image", len(tm.Manifests))
	}
	entry := tm.Manifests[0]
	if got := entry.Annotations[annotationContainerdName]; got != testRef {
		t.Fatalf("index.json %s = %q, want %q (ctr images import names the image by it)", annotationContainerdName, got, testRef)
	}
	if got := entry.Annotations[annotationRefName]; got != "1" {
		t.Fatalf("index.json %s = %q, want the tag %q", annotationRefName, got, "1")
	}
	if want := testRef + " " + entry.Digest.String() + "\n"; line != want {
		t.Fatalf("printed %q, want the digest index.json names: %q", line, want)
	}
	idx, err := top.ImageIndex(entry.Digest)
	if err != nil {
		t.Fatalf("index.json's entry is not an image index: %v", err)
	}
	// validate's full mode assumes gzip layers; the blob digests are
	// checked below against the bytes instead.
	if err := validate.Index(idx, validate.Fast); err != nil {
		t.Fatalf("image index does not validate: %v", err)
	}
	checkBlobDigests(t, filepath.Join(lay, "blobs", "sha256"))
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("manifest %s has no platform in the index", d.Digest)
		}
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, *d.Platform)
	}
	slices.Sort(platforms)
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("platforms %v, want %v", platforms, want)
	}
}

func checkImage(t *testing.T, img v1.Image, p v1.Platform) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
	}
	if want := []string{"/hello", "--flag", "arg"}; !slices.Equal(cf.Config.Entrypoint, want) {
		t.Errorf("%s: entrypoint %q, want %q", p, cf.Config.Entrypoint, want)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", p, cf.Config.User)
	}
	if cf.Config.Labels["k"] != "v" {
		t.Errorf("%s: labels %v, want k=v", p, cf.Config.Labels)
	}
	if !cf.Created.Equal(epoch) {
		t.Errorf("%s: created %s, want the epoch", p, cf.Created)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", p, len(layers), err)
	}
	ld, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.RootFS.DiffIDs) != 1 || cf.RootFS.DiffIDs[0] != ld {
		t.Errorf("%s: diff IDs %v, want the uncompressed layer's digest %s", p, cf.RootFS.DiffIDs, ld)
	}
	files := layerFiles(t, layers[0])
	bin, ok := files["hello"]
	if !ok {
		t.Fatalf("%s: layer has no /hello: %v", p, slices.Sorted(maps.Keys(files)))
	}
	if bin.hdr.Mode != 0o755 || !bin.hdr.ModTime.Equal(epoch) || bin.hdr.Uid != 0 {
		t.Errorf("%s: /hello mode %o mtime %s uid %d, want 0755 at the epoch owned by 0", p, bin.hdr.Mode, bin.hdr.ModTime, bin.hdr.Uid)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.body))
	if err != nil {
		t.Fatalf("%s: /hello is not an ELF binary: %v", p, err)
	}
	if want := archs[p.Architecture]; f.Machine != want {
		t.Errorf("%s: /hello is built for %s, want %s", p, f.Machine, want)
	}
	if !strings.Contains(string(files["etc/passwd"].body), "nonroot:x:65532:65532:") {
		t.Errorf("%s: /etc/passwd does not name uid 65532: %q", p, files["etc/passwd"].body)
	}
	if tmp, ok := files["tmp/"]; !ok || tmp.hdr.Mode != 0o1777 {
		t.Errorf("%s: /tmp missing or not 1777", p)
	}
}

// checkBlobDigests: every blob is named by the sha256 of its bytes.
func checkBlobDigests(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if got := fmt.Sprintf("%x", fileSHA(t, filepath.Join(dir, e.Name()))); got != e.Name() {
			t.Errorf("blob %s holds bytes of sha256 %s", e.Name(), got)
		}
	}
}

type layerFile struct {
	hdr  *tar.Header
	body []byte
}

func layerFiles(t *testing.T, l v1.Layer) map[string]layerFile {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{hdr: h, body: b}
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("archive entry %q escapes the directory", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRefusesBadInput: every refusal names the value.
func TestRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "x")
	if err := os.WriteFile(bin, []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "y")
	write(t, notExec, "data")
	out := filepath.Join(dir, "o.tar")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--binary", "linux/amd64=" + bin, "localhost/x", out}, "REF must be repository:tag"},
		{[]string{"--user", "nonroot", "--binary", "linux/amd64=" + bin, testRef, out}, `--user="nonroot"`},
		{[]string{"--label", "novalue", "--binary", "linux/amd64=" + bin, testRef, out}, `"novalue"`},
		{[]string{testRef, out}, "--binary OS/ARCH=PATH is required"},
		{[]string{"--binary", "amd64=" + bin, testRef, out}, `"amd64=`},
		{[]string{"--binary", "linux/amd64=" + bin, "--binary", "linux/amd64=" + bin, testRef, out}, "linux/amd64 given twice"},
		{[]string{"--binary", "linux/amd64=" + notExec, testRef, out}, notExec + " is not an executable"},
		{[]string{"--binary", "linux/amd64=" + bin, "--binary", "linux/arm64=" + notExec, testRef, out}, "must have the same name"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(tc.args, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mkimage %q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused build left %s behind (%v)", out, err)
	}
}
