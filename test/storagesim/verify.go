package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/cellfleet/cellfleet/test/storagesim/api"
)

// verify reads back every record and file the ledger names from the volume
// (the log is read afresh from the file, never from memory) and sorts each
// into verified, missing or wrong.
func (w *workload) verify(req api.VerifyRequest) (api.VerifyReport, error) {
	var rep api.VerifyReport
	data, err := os.ReadFile(w.logPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, fmt.Errorf("read log: %w", err)
	}
	recs, _, corrupt := scanLog(data)
	rep.CorruptRecords = corrupt
	onLog := make(map[uint64]uint32, len(recs))
	for _, r := range recs {
		onLog[r.seq] = api.Checksum(r.payload)
	}
	for _, e := range req.Records {
		got, ok := onLog[e.Seq]
		switch {
		case !ok:
			rep.Missing = append(rep.Missing, api.Mismatch{Kind: api.KindRecord, Seq: e.Seq, Want: e.CRC, Detail: "not in the valid log"})
		case got != e.CRC:
			rep.Wrong = append(rep.Wrong, api.Mismatch{Kind: api.KindRecord, Seq: e.Seq, Want: e.CRC, Got: got, Detail: "payload differs"})
		default:
			rep.Verified++
		}
	}
	for _, e := range req.Files {
		got, intact, err := readFile(w.filesDir(), e.Seq)
		switch {
		case errors.Is(err, os.ErrNotExist):
			rep.Missing = append(rep.Missing, api.Mismatch{Kind: api.KindFile, Seq: e.Seq, Want: e.CRC, Detail: "no such file"})
		case err != nil:
			rep.Missing = append(rep.Missing, api.Mismatch{Kind: api.KindFile, Seq: e.Seq, Want: e.CRC, Detail: "unreadable: " + err.Error()})
		case !intact:
			rep.Wrong = append(rep.Wrong, api.Mismatch{Kind: api.KindFile, Seq: e.Seq, Want: e.CRC, Got: got, Detail: "checksum trailer does not match the content"})
		case got != e.CRC:
			rep.Wrong = append(rep.Wrong, api.Mismatch{Kind: api.KindFile, Seq: e.Seq, Want: e.CRC, Got: got, Detail: "payload differs"})
		default:
			rep.Verified++
		}
	}
	return rep, nil
}
