package mux_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

func TestBearerTokenIsRequiredBeforeAnyCall(t *testing.T) {
	v := newVolumeCA(t, "vol")
	r0 := startPort(t, v, sanR0)
	cases := []struct {
		name string
		tok  string
		want wire.Status
	}{
		{"the volume's token", token, wire.StatusOK},
		{"empty token", "", wire.StatusUnauthorized},
		{"wrong token of the same length", "f123456789abcdef0123456789abcdef", wire.StatusUnauthorized},
		{"a prefix of the token", token[:16], wire.StatusUnauthorized},
		{"the token with a suffix", token + "x", wire.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := r0.calls.Load()
			c, err := dial(t, r0.addr(), rpcConfig(v, sanR0))
			if err != nil {
				t.Fatal(err)
			}
			hello, call, err := helloAndCall(t, c, tc.tok)
			if hello.Status != tc.want {
				t.Fatalf("hello with %s answered %s (%v), want %s", tc.name, hello.Status, err, tc.want)
			}
			if tc.want == wire.StatusOK {
				if err != nil || call.Status != wire.StatusOK {
					t.Fatalf("an authenticated call failed: %+v %v", call, err)
				}
				return
			}
			if err := closedByPeer(c); err != nil {
				t.Fatalf("a stream with a rejected token must be closed: %v", err)
			}
			if n := r0.calls.Load() - before; n != 0 {
				t.Fatalf("an unauthenticated stream reached the handler %d times", n)
			}
		})
	}
}

// rawFrame writes a length prefix and body without WriteFrame's own limit.
func rawFrame(length uint32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, length), body...)
}

func TestOversizedFramesAreRefusedBeforeAllocationAndNothingIsCalled(t *testing.T) {
	v := newVolumeCA(t, "vol")
	r0 := startPort(t, v, sanR0)
	cases := []struct {
		name      string
		authFirst bool
		frame     []byte
	}{
		{"hello larger than any token", false, rawFrame(wire.MaxToken+65, []byte{byte(wire.FrameHello)})},
		{"call one byte past the frame limit", true, rawFrame(wire.MaxFrame+1, []byte{byte(wire.FrameCall)})},
		{"call claiming 4 GiB", true, rawFrame(^uint32(0), []byte{byte(wire.FrameCall)})},
		{"empty frame", true, rawFrame(0, nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := r0.calls.Load()
			c, err := dial(t, r0.addr(), rpcConfig(v, sanR0))
			if err != nil {
				t.Fatal(err)
			}
			if tc.authFirst {
				if err := wire.WriteFrame(c, wire.AppendHello(&wire.Hello{Token: token})); err != nil {
					t.Fatal(err)
				}
				if rep, err := readReply(c); err != nil || rep.Status != wire.StatusOK {
					t.Fatalf("hello: %v %v", rep.Status, err)
				}
			}
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			rep, err := readReply(c)
			if err != nil || rep.Status != wire.StatusBadRequest {
				t.Fatalf("an oversized frame must be answered %q, got %q %q (%v)", wire.StatusBadRequest, rep.Status, rep.Message, err)
			}
			if err := closedByPeer(c); err != nil {
				t.Fatalf("the stream must be closed after an oversized frame: %v", err)
			}
			if n := r0.calls.Load() - before; n != 0 {
				t.Fatalf("an oversized frame reached the handler %d times", n)
			}
		})
	}
	// WriteFrame refuses to send an oversized frame at all.
	if err := wire.WriteFrame(discard{}, make([]byte, wire.MaxFrame+1)); err == nil {
		t.Fatal("WriteFrame must refuse a body past MaxFrame")
	}
	if !errors.Is(wire.ErrFrameTooLarge, wire.ErrMalformed) {
		t.Fatal("an oversized frame must be reported as malformed input")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
