package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// fioResult is the part of fio's JSON output the workloads read: one job,
// its read or write side.
type fioResult struct {
	Jobs []struct {
		Read  fioSide `json:"read"`
		Write fioSide `json:"write"`
		Sync  struct {
			LatNs fioLat `json:"lat_ns"`
		} `json:"sync"`
	} `json:"jobs"`
}

type fioSide struct {
	IOBytes int64   `json:"io_bytes"`
	BwBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
	Runtime int64   `json:"runtime"` // milliseconds
	ClatNs  fioLat  `json:"clat_ns"`
}

type fioLat struct {
	Percentile map[string]float64 `json:"percentile"`
}

// fio runs one fio job on file with the arguments given (psync, buffered,
// one job) and returns its result.
func fio(ctx context.Context, file string, args ...string) (fioResult, error) {
	all := append([]string{"--name=job", "--filename=" + file, "--ioengine=psync", "--numjobs=1",
		"--output-format=json"}, args...)
	cmd := exec.CommandContext(ctx, "fio", all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fioResult{}, fmt.Errorf("fio %v: %w: %s", args, err, bytes.TrimSpace(errb.Bytes()))
	}
	var r fioResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return fioResult{}, fmt.Errorf("fio %v: its JSON output: %w", args, err)
	}
	if len(r.Jobs) != 1 {
		return fioResult{}, fmt.Errorf("fio %v: %d jobs reported, want 1", args, len(r.Jobs))
	}
	return r, nil
}

// p99ms is the 99th percentile completion latency in milliseconds.
func (s fioSide) p99ms() float64 { return s.ClatNs.Percentile["99.000000"] / 1e6 }

// mibps is the side's rate in MiB/s.
func (s fioSide) mibps() float64 { return s.BwBytes / (1 << 20) }

func gib(n int) string { return strconv.Itoa(n) + "g" }

// dropCaches writes back and drops the page cache (the replicas' backing
// files and the raw directory's too), so a read reaches the disks.
func dropCaches() error {
	if err := exec.Command("sync").Run(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}
