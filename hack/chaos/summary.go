package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// summary is the run's JSON report; lost_or_wrong must be empty.
type summary struct {
	Seed            uint64         `json:"seed"`
	Duration        string         `json:"duration"`
	FaultKinds      []string       `json:"fault_kinds"`
	Started         time.Time      `json:"started"`
	Elapsed         string         `json:"elapsed"`
	Acknowledged    map[string]int `json:"acknowledged_ops"`
	Faults          map[string]int `json:"faults"`
	FaultsFailed    map[string]int `json:"faults_failed,omitempty"`
	Errors          map[string]int `json:"errors_seen"`
	ErrorsByOp      map[string]int `json:"errors_by_operation"`
	SpawnedChildren uint64         `json:"spawned_children"`
	RegisterChecked int            `json:"register_ops_checked"`
	WorkerKilled    bool           `json:"worker_killed,omitempty"`
	LostOrWrong     []finding      `json:"lost_or_wrong"`
	ToolError       string         `json:"tool_error,omitempty"`
	FaultLog        []faultEntry   `json:"fault_log"`
	Dir             string         `json:"dir"`

	ownerKills []int64 // wall-clock times of mount-owner kills (register epochs)
}

type faultEntry struct {
	At     string `json:"at"` // since the start of the faults
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
	Error  string `json:"error,omitempty"`
}

func newSummary(o options) *summary {
	return &summary{Seed: o.seed, Duration: o.duration.String(), Started: time.Now(), Acknowledged: map[string]int{},
		Faults: map[string]int{}, FaultsFailed: map[string]int{}, Errors: map[string]int{}, ErrorsByOp: map[string]int{}, LostOrWrong: []finding{},
		FaultLog: []faultEntry{}, Dir: o.dir}
}

func (s *summary) fault(kind string, at time.Time, detail string, err error) {
	e := faultEntry{At: at.Sub(s.Started).Round(time.Millisecond).String(), Kind: kind, Detail: detail}
	if err != nil {
		e.Error = err.Error()
		s.FaultsFailed[kind]++
	} else {
		s.Faults[kind]++
	}
	s.FaultLog = append(s.FaultLog, e)
}

func (s *summary) write(path string) error {
	s.Elapsed = time.Since(s.Started).Round(time.Second).String()
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	say("summary written to %s", path)
	return nil
}
