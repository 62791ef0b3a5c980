package chunkstore

// Manifest format (decision 0010, item 3), big endian:
//
//	magic     8 bytes  "CFCHNK\x00\x01"
//	id        uint64   the capture's generation (local to the writing store)
//	index     uint64   the caller's label (the applied log index)
//	chunk     uint32   chunk size
//	count     uint64   entries, at most maxEntries
//	entries   count ×: ino uint64, index uint64, version uint64, length
//	          uint32, SHA-256 of the length bytes (32), then one CRC-32C
//	          uint32 per BlockSize bytes of the length
//	sum       32 bytes SHA-256 of every byte before it
//
// Entries are in (ino, index) order, each chunk once; a file without
// chunks is not named (its size and everything else about it are the
// caller's metadata). A manifest sent to a follower is the same bytes: the
// follower ignores the versions, which name the sender's files, and finds
// or installs each chunk by its digest (rebuild.go).

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

var manifestMagic = [8]byte{'C', 'F', 'C', 'H', 'N', 'K', 0, 1}

// maxEntries bounds the chunks a manifest may name: 16 TiB of 1 MiB
// chunks, far past any volume's capacity.
const maxEntries = 1 << 24

// Manifest names every chunk of a persisted capture.
type Manifest struct {
	ID        uint64
	Index     uint64
	ChunkSize uint32
	Entries   []Entry
}

// Entry is one chunk of a manifest.
type Entry struct {
	Ino     uint64
	Index   uint64 // chunk index: the chunk holds bytes from Index×ChunkSize
	Version uint64 // the writing store's version
	Len     uint32 // bytes in the chunk; past them, up to the chunk size, zeros
	SHA256  [sha256.Size]byte
	CRCs    []uint32 // CRC-32C per BlockSize bytes of Len
}

func (e *Entry) sum() *chunkSum { return &chunkSum{n: e.Len, sha: e.SHA256, crcs: e.CRCs} }

// Encode returns the manifest's bytes.
func (m *Manifest) Encode() []byte {
	var b bytes.Buffer
	b.Write(manifestMagic[:])
	b.Write(binary.BigEndian.AppendUint64(nil, m.ID))
	b.Write(binary.BigEndian.AppendUint64(nil, m.Index))
	b.Write(binary.BigEndian.AppendUint32(nil, m.ChunkSize))
	b.Write(binary.BigEndian.AppendUint64(nil, uint64(len(m.Entries))))
	var ent []byte
	for i := range m.Entries {
		e := &m.Entries[i]
		ent = binary.BigEndian.AppendUint64(ent[:0], e.Ino)
		ent = binary.BigEndian.AppendUint64(ent, e.Index)
		ent = binary.BigEndian.AppendUint64(ent, e.Version)
		ent = binary.BigEndian.AppendUint32(ent, e.Len)
		ent = append(ent, e.SHA256[:]...)
		for _, c := range e.CRCs {
			ent = binary.BigEndian.AppendUint32(ent, c)
		}
		b.Write(ent)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

// DecodeManifest reads and verifies a manifest. Every field is bounded
// before it is used or allocated for; any failure wraps ErrCorrupt.
func DecodeManifest(r io.Reader) (*Manifest, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(r, 64<<10)
	d := &decoder{r: io.TeeReader(br, h)}
	var magic [8]byte
	d.read(magic[:])
	m := &Manifest{ID: d.u64(), Index: d.u64(), ChunkSize: d.u32()}
	count := d.u64()
	if d.err != nil {
		return nil, fmt.Errorf("%w: manifest header: %w", ErrCorrupt, d.err)
	}
	if err := checkHeader(magic, m, count); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	for i := uint64(0); i < count; i++ {
		e, err := d.entry(m)
		if err != nil {
			return nil, fmt.Errorf("%w: manifest %d, entry %d: %w", ErrCorrupt, m.ID, i, err)
		}
		if n := len(m.Entries); n > 0 && !before(&m.Entries[n-1], &e) {
			return nil, fmt.Errorf("%w: manifest %d, entry %d: out of order", ErrCorrupt, m.ID, i)
		}
		m.Entries = append(m.Entries, e)
	}
	want := h.Sum(nil)
	var got [sha256.Size]byte
	if _, err := io.ReadFull(br, got[:]); err != nil || !bytes.Equal(got[:], want) {
		return nil, fmt.Errorf("%w: manifest %d: checksum mismatch", ErrCorrupt, m.ID)
	}
	return m, nil
}

func checkHeader(magic [8]byte, m *Manifest, count uint64) error {
	switch {
	case magic != manifestMagic:
		return fmt.Errorf("magic %q", magic[:])
	case m.ID == 0 || m.ID >= maxGeneration:
		return fmt.Errorf("id %d", m.ID)
	case validChunkSize(int(m.ChunkSize)) != nil:
		return validChunkSize(int(m.ChunkSize))
	case count > maxEntries:
		return fmt.Errorf("%d entries, at most %d", count, maxEntries)
	}
	return nil
}

func before(a, b *Entry) bool { return a.Ino < b.Ino || (a.Ino == b.Ino && a.Index < b.Index) }

// checkEntry bounds one entry against its manifest's header.
func checkEntry(m *Manifest, e *Entry) error {
	switch {
	case e.Ino == 0:
		return fmt.Errorf("inode 0")
	case e.Index > (wire.MaxFileSize-1)/uint64(m.ChunkSize):
		return fmt.Errorf("chunk index %d past the largest file", e.Index)
	case e.Version == 0 || e.Version > m.ID:
		return fmt.Errorf("version %d of a manifest with id %d", e.Version, m.ID)
	case e.Len == 0 || e.Len > m.ChunkSize:
		return fmt.Errorf("length %d of a %d-byte chunk", e.Len, m.ChunkSize)
	case len(e.CRCs) != blocks(e.Len):
		return fmt.Errorf("%d CRCs for %d bytes", len(e.CRCs), e.Len)
	}
	return nil
}

type decoder struct {
	r   io.Reader
	err error
	buf [8]byte
}

func (d *decoder) read(p []byte) {
	if d.err == nil {
		_, d.err = io.ReadFull(d.r, p)
	}
}

func (d *decoder) u64() uint64 { d.read(d.buf[:8]); return binary.BigEndian.Uint64(d.buf[:8]) }
func (d *decoder) u32() uint32 { d.read(d.buf[:4]); return binary.BigEndian.Uint32(d.buf[:4]) }

func (d *decoder) entry(m *Manifest) (Entry, error) {
	e := Entry{Ino: d.u64(), Index: d.u64(), Version: d.u64(), Len: d.u32()}
	d.read(e.SHA256[:])
	if d.err != nil {
		return e, d.err
	}
	if e.Len == 0 || e.Len > m.ChunkSize {
		return e, fmt.Errorf("length %d of a %d-byte chunk", e.Len, m.ChunkSize)
	}
	e.CRCs = make([]uint32, blocks(e.Len))
	for i := range e.CRCs {
		e.CRCs[i] = d.u32()
	}
	if d.err != nil {
		return e, d.err
	}
	return e, checkEntry(m, &e)
}
