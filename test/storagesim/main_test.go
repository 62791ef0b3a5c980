package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// These tests run the fixture's HTTP API on a real directory: what is
// acknowledged is read back, damage is reported as wrong data or missing, and
// a failed operation is answered 503, counted and never acknowledged.

type fixture struct {
	t   *testing.T
	dir string
	srv *httptest.Server
}

func start(t *testing.T, dir string) *fixture {
	t.Helper()
	w, err := open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.handler())
	t.Cleanup(srv.Close)
	return &fixture{t: t, dir: dir, srv: srv}
}

func (f *fixture) op(path string, payload string) (api.Ack, int) {
	f.t.Helper()
	resp, err := http.Post(f.srv.URL+path, "application/octet-stream", bytes.NewBufferString(payload))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ack api.Ack
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&ack); err != nil {
			f.t.Fatal(err)
		}
	}
	return ack, resp.StatusCode
}

func (f *fixture) verify(req api.VerifyRequest) api.VerifyReport {
	f.t.Helper()
	b, _ := json.Marshal(req)
	resp, err := http.Post(f.srv.URL+api.PathVerify, "application/json", bytes.NewReader(b))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep api.VerifyReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		f.t.Fatal(err)
	}
	return rep
}

func (f *fixture) stats() api.Stats {
	f.t.Helper()
	resp, err := http.Get(f.srv.URL + api.PathStats)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s api.Stats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// write acknowledges n records and n files and returns the ledger.
func (f *fixture) write(n int) api.VerifyRequest {
	f.t.Helper()
	var req api.VerifyRequest
	for i := range n {
		p := fmt.Sprintf("payload-%d", i)
		ack, code := f.op(api.PathAppend, p)
		if code != http.StatusOK || ack.CRC != api.Checksum([]byte(p)) {
			f.t.Fatalf("append %d: %d %+v", i, code, ack)
		}
		req.Records = append(req.Records, api.Entry{Seq: ack.Seq, CRC: ack.CRC})
		ack, code = f.op(api.PathFile, p)
		if code != http.StatusOK {
			f.t.Fatalf("file %d: %d", i, code)
		}
		req.Files = append(req.Files, api.Entry{Seq: ack.Seq, CRC: ack.CRC})
	}
	return req
}

func TestEveryAcknowledgedOperationIsReadBackAfterARestart(t *testing.T) {
	dir := t.TempDir()
	f := start(t, dir)
	req := f.write(20)
	// A torn, unacknowledged append at the tail, as a crash mid-write leaves.
	lf, err := os.OpenFile(filepath.Join(dir, logFileName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	lf.Write(encodeRecord(999, []byte("torn"))[:10])
	lf.Close()

	g := start(t, dir) // a fresh process on the same volume
	if s := g.stats(); s.RecoveredRecords != 20 || s.RecoveredFiles != 20 || s.TruncatedBytes != 10 {
		t.Fatalf("recovery: %+v, want 20 records, 20 files, 10 torn bytes truncated", s)
	}
	more := g.write(5)
	if more.Records[0].Seq <= req.Files[len(req.Files)-1].Seq {
		t.Fatalf("sequence %d reused after a restart (last before: %d)", more.Records[0].Seq, req.Files[len(req.Files)-1].Seq)
	}
	req.Records = append(req.Records, more.Records...)
	req.Files = append(req.Files, more.Files...)
	rep := g.verify(req)
	if rep.Verified != 50 || len(rep.Missing)+len(rep.Wrong)+rep.CorruptRecords != 0 {
		t.Fatalf("verify: %+v, want 50 verified and nothing else", rep)
	}
}

func TestVerifyTellsWrongDataFromMissing(t *testing.T) {
	dir := t.TempDir()
	f := start(t, dir)
	req := f.write(4)
	// Damage: one file's content flipped, one file removed, one record's
	// payload flipped in the middle of the log.
	p := fileName(filepath.Join(dir, filesDirName), req.Files[0].Seq)
	b, _ := os.ReadFile(p)
	b[0] ^= 0xff
	os.WriteFile(p, b, 0o644)
	os.Remove(fileName(filepath.Join(dir, filesDirName), req.Files[1].Seq))
	logb, _ := os.ReadFile(filepath.Join(dir, logFileName))
	second := len(encodeRecord(req.Records[0].Seq, []byte("payload-0")))
	logb[second+headerLen] ^= 0xff // the payload of the second record
	os.WriteFile(filepath.Join(dir, logFileName), logb, 0o644)
	// A ledger entry whose checksum the volume does not hold: wrong data.
	req.Records[0].CRC ^= 1

	rep := f.verify(req)
	kinds := map[string]int{}
	for _, m := range rep.Wrong {
		kinds["wrong "+string(m.Kind)]++
	}
	for _, m := range rep.Missing {
		kinds["missing "+string(m.Kind)]++
	}
	// Records 2 and 3 follow the damaged one: the valid log ends there, so
	// they are missing, and the log counts them as corrupt (valid records
	// past the damage).
	want := map[string]int{"wrong file": 1, "missing file": 1, "wrong record": 1, "missing record": 3}
	if fmt.Sprint(kinds) != fmt.Sprint(want) || rep.CorruptRecords != 2 || rep.Verified != 2 {
		t.Fatalf("verify: %v (corrupt %d, verified %d), want %v, corrupt 2, verified 2 (report %+v)", kinds, rep.CorruptRecords, rep.Verified, want, rep)
	}
}

func TestAFailedOperationIsReportedNotAcknowledged(t *testing.T) {
	dir := t.TempDir()
	f := start(t, dir)
	f.write(1)
	if err := os.RemoveAll(filepath.Join(dir, filesDirName)); err != nil {
		t.Fatal(err)
	}
	if _, code := f.op(api.PathFile, "lost"); code != http.StatusServiceUnavailable {
		t.Fatalf("a file whose directory is gone answered %d, want 503", code)
	}
	if s := f.stats(); s.Errors != 1 || s.Files != 1 || s.LastError == "" {
		t.Fatalf("stats after a failed file: %+v, want 1 error, 1 file", s)
	}
	if _, code := f.op(api.PathAppend, ""); code != http.StatusBadRequest {
		t.Fatalf("an empty payload answered %d, want 400", code)
	}
}
