package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// nonrootID is the uid and gid of the "nonroot" account every image carries
// (the same number distroless uses), so `--user 65532:65532` names a user
// that exists in /etc/passwd.
const nonrootID = 65532

// epoch is the only timestamp written anywhere in an image (file times,
// config and history): inputs alone decide the digest.
var epoch = time.Unix(0, 0).UTC()

// rootfsLayer is the one layer of an image: the static binary at /<name>,
// /etc/passwd and /etc/group naming root and nonroot, a world-writable /tmp
// and /work (sticky, like a tmpfs /tmp). Entries are written in a fixed order
// with fixed owners, modes and times, so the bytes depend only on the binary.
func rootfsLayer(name string, binary []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/:/%[1]s\nnonroot:x:%[2]d:%[2]d:nonroot:/:/%[1]s\n", name, nonrootID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonrootID)
	type entry struct {
		path string
		mode int64
		body []byte // nil: a directory
	}
	// Sorted by path below, as `tar --sort=name` wrote them before.
	entries := []entry{
		{path: "etc/", mode: 0o755},
		{path: "etc/group", mode: 0o644, body: []byte(group)},
		{path: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{path: "tmp/", mode: 0o1777},
		{path: "work/", mode: 0o1777},
		{path: name, mode: 0o755, body: binary},
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.path, b.path) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.path, Mode: e.mode, ModTime: epoch}
		if e.body == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// readBinary reads an executable regular file.
func readBinary(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("%s is not an executable regular file", path)
	}
	return os.ReadFile(path)
}
