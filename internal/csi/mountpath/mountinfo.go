package mountpath

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo.
type Mount struct {
	ID         int
	Device     string // major:minor of the filesystem
	Root       string // path within the filesystem that is mounted here
	MountPoint string
	FSType     string
	Source     string
}

// SelfMountInfo is the mount table of the calling process's namespace.
const SelfMountInfo = "/proc/self/mountinfo"

// ReadMounts parses a mountinfo file.
func ReadMounts(file string) ([]Mount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", file, err)
	}
	defer f.Close()
	return ParseMounts(f)
}

// ParseMounts parses mountinfo text (see proc(5)).
func ParseMounts(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 7 || sep < 6 || len(fields) < sep+3 {
			return nil, fmt.Errorf("malformed mountinfo line %q", sc.Text())
		}
		id, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, fmt.Errorf("mountinfo id %q: %w", fields[0], err)
		}
		out = append(out, Mount{
			ID: id, Device: fields[2], Root: unescape(fields[3]), MountPoint: unescape(fields[4]),
			FSType: fields[sep+1], Source: unescape(fields[sep+2]),
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for space, etc.).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// IsMountPoint reports whether something is mounted exactly at p in the
// namespace whose mountinfo file is given. It works for a FUSE mount whose
// owner died, where stat(p) fails with ENOTCONN.
func IsMountPoint(mountinfo, p string) (bool, error) {
	ms, err := ReadMounts(mountinfo)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.MountPoint == p {
			return true, nil
		}
	}
	return false, nil
}

// MountsOf returns the mount points at which dir (or something beneath it)
// is mounted, in the namespace of mountinfo: bind mounts of dir show its
// filesystem's device with a root inside dir. The mount that holds dir
// itself is not counted.
func MountsOf(mountinfo, dir string) ([]string, error) {
	ms, err := ReadMounts(mountinfo)
	if err != nil {
		return nil, err
	}
	// The mount holding dir: the longest mount point that contains it.
	var holder *Mount
	for i := range ms {
		m := &ms[i]
		if (m.MountPoint == "/" || m.MountPoint == dir || Within(m.MountPoint, dir)) &&
			(holder == nil || len(m.MountPoint) >= len(holder.MountPoint)) {
			holder = m
		}
	}
	if holder == nil {
		return nil, fmt.Errorf("no mount holds %s", dir)
	}
	rel := strings.TrimPrefix(dir, holder.MountPoint)
	if holder.MountPoint == "/" {
		rel = dir
	}
	inFS := filepath.Clean(holder.Root + "/" + rel)
	var out []string
	for _, m := range ms {
		if m.ID == holder.ID || m.Device != holder.Device {
			continue
		}
		if m.Root == inFS || Within(inFS, m.Root) {
			out = append(out, m.MountPoint)
		}
	}
	return out, nil
}
