package chunkstore

// On-disk names and the format marker. Every name read back from the disk
// is parsed strictly and bounded: a name this package did not write is an
// error naming it, never guessed at or removed (docs/journal-format.md does
// the same with a stray segment name).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cellfleet/cellfleet/internal/durable"
)

const (
	// FormatVersion is the only store format this package reads.
	FormatVersion = 1
	formatFile    = "format"
	formatPrefix  = "cellfleet chunk store "
	chunksDir     = "chunks"
	manifestsDir  = "manifests"
	manifestExt   = ".manifest"
	// maxFormatBytes bounds what is read of the format marker.
	maxFormatBytes = 4 << 10
)

// ErrFormat is wrapped by the error for a store directory whose format
// marker is missing, unknown or unreadable.
var ErrFormat = errors.New("chunk store format")

// chunkKey names one chunk file.
type chunkKey struct{ ino, idx, ver uint64 }

func hex(v uint64) string { return strconv.FormatUint(v, 16) }

func (s *Store) inoDir(ino uint64) string { return filepath.Join(s.dir, chunksDir, hex(ino)) }

func (s *Store) chunkPath(k chunkKey) string {
	return filepath.Join(s.inoDir(k.ino), hex(k.idx)+"."+hex(k.ver))
}

func (s *Store) manifestPath(id uint64) string {
	return filepath.Join(s.dir, manifestsDir, fmt.Sprintf("%016x%s", id, manifestExt))
}

// parseHex parses a lower-case hex number as this package writes it: no
// sign, no prefix, no leading zeros beyond a single "0".
func parseHex(s string) (uint64, bool) {
	if s == "" || len(s) > 16 || (len(s) > 1 && s[0] == '0') || strings.ToLower(s) != s {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 64)
	return v, err == nil
}

// parseChunkName parses "<index>.<version>" within bounds: the index fits
// the largest file, the version is below the generation limit.
func (s *Store) parseChunkName(name string) (idx, ver uint64, ok bool) {
	a, b, found := strings.Cut(name, ".")
	if !found {
		return 0, 0, false
	}
	idx, ok1 := parseHex(a)
	ver, ok2 := parseHex(b)
	if !ok1 || !ok2 || idx > s.maxIndex() || ver == 0 || ver >= maxGeneration {
		return 0, 0, false
	}
	return idx, ver, true
}

// parseManifestName parses "<16 hex digits>.manifest".
func parseManifestName(name string) (uint64, bool) {
	base, found := strings.CutSuffix(name, manifestExt)
	if !found || len(base) != 16 || strings.ToLower(base) != base {
		return 0, false
	}
	id, err := strconv.ParseUint(base, 16, 64)
	return id, err == nil && id != 0 && id < maxGeneration
}

func formatText(chunkSize int) []byte {
	return fmt.Appendf(nil, "%s%d\nchunk size %d\n", formatPrefix, FormatVersion, chunkSize)
}

// readFormat returns the chunk size recorded in dir's format marker, or
// found=false when there is none.
func readFormat(dir string) (chunkSize int, found bool, err error) {
	path := filepath.Join(dir, formatFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: open %s: %w", ErrFormat, path, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxFormatBytes))
	if err != nil {
		return 0, true, fmt.Errorf("%w: read %s: %w", ErrFormat, path, err)
	}
	first, rest, _ := bytes.Cut(raw, []byte("\n"))
	version, ok := bytes.CutPrefix(first, []byte(formatPrefix))
	if !ok || string(version) != strconv.Itoa(FormatVersion) {
		return 0, true, fmt.Errorf("%w: %s records %q; this binary reads only %q: "+
			"convert the data directory with a binary that knows its format, or rebuild the replica from its group",
			ErrFormat, path, clip(first), formatPrefix+strconv.Itoa(FormatVersion))
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	size, err := strconv.Atoi(strings.TrimPrefix(string(line), "chunk size "))
	if err != nil || !strings.HasPrefix(string(line), "chunk size ") || validChunkSize(size) != nil {
		return 0, true, fmt.Errorf("%w: %s: bad chunk size line %q", ErrFormat, path, clip(line))
	}
	return size, true, nil
}

// clip bounds a name read from the disk before it goes into an error.
func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// createLayout makes a new store's directories and then its format marker,
// durably: a directory without a marker is recognised as one whose
// creation did not finish.
func createLayout(dir string, chunkSize int) error {
	for _, d := range []string{chunksDir, manifestsDir} {
		if err := durable.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	return durable.WriteFile(filepath.Join(dir, formatFile), formatText(chunkSize))
}

func validChunkSize(n int) error {
	if n < BlockSize || n > MaxChunkSize || n&(n-1) != 0 {
		return fmt.Errorf("chunk size %d: want a power of two from %d to %d", n, BlockSize, MaxChunkSize)
	}
	return nil
}
