package replica

import (
	"testing"

	"github.com/hashicorp/raft"
)

func appendOf(term, commit uint64, indexes ...uint64) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{Term: term, LeaderCommitIndex: commit}
	for _, i := range indexes {
		req.Entries = append(req.Entries, &raft.Log{Index: i, Term: term})
	}
	return req
}

// A follower's target is the higher of the commit index and the last entry
// sent to it in the current term; entries of an older term do not count,
// since a newer coordinator's log may be shorter.
func TestLeaderViewTargetIsTheHighestEntrySentInTheTerm(t *testing.T) {
	var v leaderView
	v.saw(appendOf(2, 10, 11, 12, 13))
	if got := v.target(2); got != 13 {
		t.Fatalf("target after entries 11..13 in term 2: %d, want 13", got)
	}
	v.saw(appendOf(2, 12, 12)) // a resend of an older entry lowers nothing
	if got := v.target(2); got != 13 {
		t.Fatalf("target after a resend of entry 12: %d, want 13", got)
	}
	if got := v.target(3); got != 12 {
		t.Fatalf("target in term 3 with term 2's entries only: %d, want the commit index 12", got)
	}
	v.saw(appendOf(3, 12, 13))
	if got := v.target(3); got != 13 {
		t.Fatalf("target after entry 13 in term 3: %d, want 13", got)
	}
	v.saw(appendOf(3, 20)) // a heartbeat-like request without entries moves the commit index only
	if got := v.target(3); got != 20 {
		t.Fatalf("target after commit index 20: %d, want 20", got)
	}
}
