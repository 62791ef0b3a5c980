// Command mkimage builds a multi-platform OCI image archive from static
// binaries with go-containerregistry: no registry, no daemon, no base image
// (each platform's image starts from empty.Image). The archive is an OCI image
// layout in one tar whose index.json names the image through
// io.containerd.image.name, so `ctr images import` tags it. Every timestamp is
// the epoch, so the same binaries give the same digest.
//
//	mkimage [--user UID:GID] [--label KEY=VALUE]... --binary OS/ARCH=PATH... REF OUT.tar [ARGS...]
//
// Each binary lands at /<basename> (the same name for every platform); the
// entrypoint is ["/<basename>", ARGS...]. It prints "REF sha256:<index
// digest>": REF's repository @ that digest is how a Pod pins the image.
// hack/cluster/images.sh (`make images`) is its caller.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// userPattern: a numeric uid or uid:gid. Names would need a lookup in the
// image's /etc/passwd by the runtime, and a kubelet's runAsNonRoot check
// can only verify a numeric user.
var userPattern = regexp.MustCompile(`^[0-9]{1,10}(:[0-9]{1,10})?$`)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(2)
	}
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mkimage [--user UID:GID] [--label KEY=VALUE]... --binary OS/ARCH=PATH... REF OUT.tar [ARGS...]")
		fs.PrintDefaults()
	}
	var user string
	var labels, binaries listFlag
	fs.StringVar(&user, "user", "", "numeric UID or UID:GID the container runs as (empty: root)")
	fs.Var(&labels, "label", "KEY=VALUE image label (repeatable)")
	fs.Var(&binaries, "binary", "OS/ARCH=PATH: the static binary of one platform (repeatable; the first is also the docker-archive image)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		fs.Usage()
		return errors.New("REF and OUT.tar are required")
	}
	s, err := parseSpec(user, labels, binaries, fs.Args()[2:])
	if err != nil {
		return err
	}
	ref, err := name.NewTag(fs.Arg(0), name.StrictValidation)
	if err != nil {
		return fmt.Errorf("REF must be repository:tag: %w", err)
	}
	idx, imgs, err := buildIndex(s)
	if err != nil {
		return err
	}
	digest, err := writeArchive(fs.Arg(1), ref, idx, imgs[0])
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s %s\n", fs.Arg(0), digest)
	return err
}

// parseSpec validates the flags into a spec.
func parseSpec(user string, labels, binaries, args []string) (spec, error) {
	s := spec{User: user, Args: args}
	if user != "" && !userPattern.MatchString(user) {
		return s, fmt.Errorf("--user=%q: must be a numeric UID or UID:GID", user)
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return s, fmt.Errorf("--label wants KEY=VALUE, got %q", l)
		}
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[k] = v
	}
	if len(binaries) == 0 {
		return s, errors.New("at least one --binary OS/ARCH=PATH is required")
	}
	seen := map[string]bool{}
	for _, b := range binaries {
		plat, path, ok := strings.Cut(b, "=")
		if !ok || path == "" {
			return s, fmt.Errorf("--binary wants OS/ARCH=PATH, got %q", b)
		}
		p, err := v1.ParsePlatform(plat)
		if err != nil || p.OS == "" || p.Architecture == "" {
			return s, fmt.Errorf("--binary %q: platform must be OS/ARCH[/VARIANT]: %v", b, err)
		}
		if seen[p.String()] {
			return s, fmt.Errorf("--binary: platform %s given twice", p)
		}
		seen[p.String()] = true
		s.Binaries = append(s.Binaries, platformBinary{Platform: *p, Path: path})
	}
	return s, nil
}
