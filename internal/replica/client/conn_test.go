package client

import (
	"bytes"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func decodeFrame(t *testing.T, rep *wire.Reply) (wire.Reply, []byte) {
	t.Helper()
	body, err := wire.ReadFrame(bytes.NewReader(wire.ReplyFrame(wire.FrameReply, rep)), wire.MaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := wire.DecodeReply(body)
	if err != nil {
		t.Fatal(err)
	}
	return got, body
}

// A read's reply hands its received frame to the result (the FUSE read
// reply writes the data from it and returns it to the pool); a reply
// without data keeps nothing of the frame, so it goes back at once.
func TestReadRepliesLendTheirFrameToTheResult(t *testing.T) {
	data := bytes.Repeat([]byte("r"), 256<<10)
	rep, body := decodeFrame(t, &wire.Reply{ID: 1, Results: []wire.Result{{N: uint64(len(data)), Data: data}}})
	if !lendBody(&rep, body) {
		t.Fatalf("a read reply must hand its frame to the result")
	}
	r := rep.Results[0]
	if len(r.Frame) == 0 || &r.Frame[0] != &body[0] || !bytes.Equal(r.Data, data) {
		t.Fatalf("the result's frame is not the received body or its data differs")
	}
	rep, body = decodeFrame(t, &wire.Reply{ID: 2, Results: []wire.Result{{Entries: []wire.DirEntry{{Name: "n", Ino: 3}}}}})
	if lendBody(&rep, body) || rep.Results[0].Frame != nil {
		t.Fatalf("a reply without data must not keep its frame")
	}
	clear(body) // the body went back to the pool: decoded names are copies
	if rep.Results[0].Entries[0].Name != "n" {
		t.Fatalf("a decoded name aliases the returned frame")
	}
}
