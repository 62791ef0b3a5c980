package wire

import (
	"bytes"
	"strings"
	"testing"
)

func TestCoordinatorHintCarriesTheServerNameAndStaysReadableByOlderPeers(t *testing.T) {
	rep := &Reply{ID: 1, Status: StatusNotCoordinator, LeaderID: "r3", LeaderAddr: "10.0.0.3:7100",
		LeaderServerName: "vol-r3.ns.svc"}
	_, got, err := DecodeReply(AppendReply(FrameReply, rep))
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaderID != "r3" || got.LeaderAddr != "10.0.0.3:7100" || got.LeaderServerName != "vol-r3.ns.svc" {
		t.Fatalf("hint decoded as id %q addr %q server name %q", got.LeaderID, got.LeaderAddr, got.LeaderServerName)
	}

	// A worker that predates the server name sends the bare address: the
	// same bytes a reply without a server name encodes to today, decoded
	// with no server name.
	old := &Reply{ID: 1, Status: StatusNotCoordinator, LeaderID: "r3", LeaderAddr: "10.0.0.3:7100"}
	enc := AppendReply(FrameReply, old)
	legacy := legacyReplyHead(old)
	if !bytes.Equal(enc, legacy) {
		t.Fatalf("a reply without a server name changed its encoding:\n got %x\nwant %x", enc, legacy)
	}
	if _, got, err = DecodeReply(enc); err != nil || got.LeaderServerName != "" || got.LeaderAddr != "10.0.0.3:7100" {
		t.Fatalf("bare address decoded as %+v (%v)", got, err)
	}

	// The field stays within the bound every decoder, older ones too,
	// applies: a name that would push it past MaxName is left out.
	long := &Reply{ID: 1, Status: StatusNotCoordinator, LeaderID: "r3", LeaderAddr: "10.0.0.3:7100",
		LeaderServerName: strings.Repeat("a", MaxName)}
	if _, got, err = DecodeReply(AppendReply(FrameReply, long)); err != nil || got.LeaderServerName != "" || got.LeaderAddr != "10.0.0.3:7100" {
		t.Fatalf("over-long hint decoded as %+v (%v)", got, err)
	}
}

// legacyReplyHead encodes a result-less reply the way the codec did before
// the server name existed.
func legacyReplyHead(r *Reply) []byte {
	e := newEncoder(64)
	e.byte1(uint8(FrameReply))
	e.u(r.ID)
	e.byte1(uint8(r.Status))
	e.str(r.Message)
	e.str(r.LeaderID)
	e.str(r.LeaderAddr)
	e.u(0)
	return e.b
}
