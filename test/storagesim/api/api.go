// Package api is the wire protocol of storagesim, the storage qualification
// fixture (test/storagesim): the operations it acknowledges and the verify
// request and report. The e2e suites import it so the ledger they keep
// outside the volume and the fixture's read-back speak one format.
package api

import "hash/crc32"

// Paths of storagesim's HTTP listener.
const (
	PathHealth = "/healthz"
	PathAppend = "/append" // POST, body = payload: one record appended to the log, fsynced
	PathFile   = "/file"   // POST, body = payload: one small file, fsynced with its directory
	PathStats  = "/stats"  // GET: Stats
	PathVerify = "/verify" // POST, body = VerifyRequest: VerifyReport
	PathStatfs = "/statfs" // GET: Statfs of the volume
)

// Kind is the kind of an acknowledged operation.
type Kind string

const (
	KindRecord Kind = "record"
	KindFile   Kind = "file"
)

// Table is the CRC-32 table of every checksum storagesim writes (Castagnoli:
// the hardware-assisted polynomial).
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the checksum of a payload as the ledger and the fixture keep it.
func Checksum(payload []byte) uint32 { return crc32.Checksum(payload, Table) }

// Ack is the answer to an acknowledged operation: the sequence the fixture
// gave it and the checksum of the payload it stored.
type Ack struct {
	Kind Kind   `json:"kind"`
	Seq  uint64 `json:"seq"`
	CRC  uint32 `json:"crc"`
}

// Stats are the fixture's counters since it started.
type Stats struct {
	Records   int64  `json:"records"`   // records acknowledged
	Files     int64  `json:"files"`     // files acknowledged
	Errors    int64  `json:"errors"`    // operations that failed (answered 503, never acknowledged)
	LastError string `json:"lastError"` // the last failure, for the test log
	// Recovered is what startup found on the volume: records and files
	// already there, and the bytes of a torn tail it truncated (an
	// unacknowledged partial append).
	RecoveredRecords int64 `json:"recoveredRecords"`
	RecoveredFiles   int64 `json:"recoveredFiles"`
	TruncatedBytes   int64 `json:"truncatedBytes"`
}

// Entry is one acknowledged operation in the ledger.
type Entry struct {
	Seq uint64 `json:"seq"`
	CRC uint32 `json:"crc"`
}

// VerifyRequest lists every acknowledged operation the fixture must find.
type VerifyRequest struct {
	Records []Entry `json:"records"`
	Files   []Entry `json:"files"`
}

// Mismatch is one acknowledged operation not read back intact.
type Mismatch struct {
	Kind Kind   `json:"kind"`
	Seq  uint64 `json:"seq"`
	Want uint32 `json:"want"`
	// Got is the checksum read back (wrong data); zero when missing.
	Got    uint32 `json:"got,omitempty"`
	Detail string `json:"detail"`
}

// VerifyReport is the read-back: every entry is either verified, missing or
// wrong (present with other data: the worse failure).
type VerifyReport struct {
	Verified int        `json:"verified"`
	Missing  []Mismatch `json:"missing"`
	Wrong    []Mismatch `json:"wrong"`
	// CorruptRecords counts records in the log whose own checksum fails
	// (before the torn tail): wrong data whether or not the ledger names them.
	CorruptRecords int `json:"corruptRecords"`
}

// Statfs is the volume's size as the application sees it.
type Statfs struct {
	TotalBytes uint64 `json:"totalBytes"`
	FreeBytes  uint64 `json:"freeBytes"`
}
