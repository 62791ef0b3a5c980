package main

import (
	"fmt"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// historyCreatedBy names this builder in every image's history.
const historyCreatedBy = "hack/mkimage"

// platformBinary is the static binary built for one platform.
type platformBinary struct {
	Platform v1.Platform
	Path     string
}

// spec is one image: the same entrypoint, user, labels and arguments for
// every platform, each platform with its own binary.
type spec struct {
	User     string
	Labels   map[string]string
	Args     []string // after the entrypoint binary
	Binaries []platformBinary
}

// entrypointName is the file name the binary gets at the image root; every
// platform's binary must have the same one.
func (s spec) entrypointName() (string, error) {
	if len(s.Binaries) == 0 {
		return "", fmt.Errorf("no binary given")
	}
	name := filepath.Base(s.Binaries[0].Path)
	for _, b := range s.Binaries[1:] {
		if n := filepath.Base(b.Path); n != name {
			return "", fmt.Errorf("binaries %s and %s must have the same name: it is the entrypoint of every platform", s.Binaries[0].Path, b.Path)
		}
	}
	return name, nil
}

// buildIndex builds an OCI image index with one single-layer image per
// platform, each on empty.Image: no base image is pulled from anywhere.
func buildIndex(s spec) (v1.ImageIndex, []v1.Image, error) {
	name, err := s.entrypointName()
	if err != nil {
		return nil, nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	imgs := make([]v1.Image, 0, len(s.Binaries))
	for _, b := range s.Binaries {
		bin, err := readBinary(b.Path)
		if err != nil {
			return nil, nil, err
		}
		img, err := buildImage(name, bin, b.Platform, s)
		if err != nil {
			return nil, nil, fmt.Errorf("image for %s: %w", b.Platform, err)
		}
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		imgs = append(imgs, img)
	}
	return idx, imgs, nil
}

// buildImage is one platform's image: OCI media types (not Docker's, which
// empty.Image starts with), an uncompressed layer (gzip output could differ
// between Go releases; an uncompressed tar's digest depends on its bytes
// only) and every timestamp at the epoch.
func buildImage(name string, bin []byte, p v1.Platform, s spec) (v1.Image, error) {
	layerTar, err := rootfsLayer(name, bin)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   static.NewLayer(layerTar, types.OCIUncompressedLayer),
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: historyCreatedBy},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = p.OS, p.Architecture, p.Variant, p.OSVersion
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: append([]string{"/" + name}, s.Args...),
		Env:        []string{"PATH=/"},
		WorkingDir: "/",
		User:       s.User,
		Labels:     s.Labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}
