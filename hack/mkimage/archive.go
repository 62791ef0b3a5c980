package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations of index.json's one entry. containerd's `ctr images import`
// names the image after io.containerd.image.name (hack/cluster/import-images.sh
// relies on it); other OCI tools read the ref name.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// writeArchive writes ref's index as an OCI image layout packed in one tar
// at out, plus a docker-archive manifest.json naming the first platform's
// image (containerd reads index.json when oci-layout is present; `docker
// load` of older Docker releases reads manifest.json). The tar's bytes
// depend only on the images: fixed order, owners, modes and times. It
// returns the index digest: what a Pod pins as repository@digest.
func writeArchive(out string, ref name.Tag, idx v1.ImageIndex, first v1.Image) (v1.Hash, error) {
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("index digest: %w", err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(out), ".mkimage-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: idx, Descriptor: v1.Descriptor{
		Annotations: map[string]string{annotationContainerdName: ref.String(), annotationRefName: ref.TagStr()},
	}})
	if _, err := layout.Write(dir, top); err != nil {
		return v1.Hash{}, fmt.Errorf("write OCI layout: %w", err)
	}
	if err := writeDockerManifest(dir, ref, first); err != nil {
		return v1.Hash{}, err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, fmt.Errorf("pack %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// writeDockerManifest writes manifest.json (docker-archive format) for img,
// whose blobs the layout already holds.
func writeDockerManifest(dir string, ref name.Tag, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	d := tarball.Descriptor{Config: blob(m.Config.Digest), RepoTags: []string{ref.String()}}
	for _, l := range m.Layers {
		d.Layers = append(d.Layers, blob(l.Digest))
	}
	b, err := json.Marshal(tarball.Manifest{d})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
}

// tarDir packs dir's tree into the tar file out in lexical order, every
// entry owned by 0:0 at the epoch with a fixed mode.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Mode: 0o644, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		st, err := src.Stat()
		if err != nil {
			return err
		}
		h.Size = st.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Sync()
}
