package fuse

import (
	"strings"
	"testing"
)

func TestOptionsRefuseTransferSizesOutsideTheKernelsRange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opt     Options
		wantErr string
	}{
		{"defaults", Options{Volume: "v"}, ""},
		{"128 KiB", Options{Volume: "v", MaxWrite: 128 << 10, MaxReadAhead: 128 << 10}, ""},
		{"below 4 KiB", Options{Volume: "v", MaxWrite: 512}, "transfer size 512 must be between 4096 and 1048576"},
		{"above 1 MiB", Options{Volume: "v", MaxReadAhead: 2 << 20}, "transfer size 2097152 must be between"},
		{"readahead window above 64 MiB", Options{Volume: "v", ReadAheadWindow: 128 << 20}, "readahead window 134217728 above 67108864"},
		{"volume name with a comma", Options{Volume: "a,b"}, "must not contain commas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.opt.withDefaults()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.MaxWrite == 0 || got.MaxReadAhead == 0 || got.ReadAheadWindow != ReadAheadWindow {
					t.Fatalf("defaults not applied: %+v", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestKernelAttributesExpireWithinTheFencingLease: the kernel's attributes
// and negative entries are all that stop a dead mount's descriptors from
// answering from cache (options.go), so they must expire before a new mount
// serves, which waits fenceHandover (fence.go); mountowner's
// TestDescriptorsOfAKilledOwnersMountNeverReadPastTheNextMountsWrites shows
// the read itself.
func TestKernelAttributesExpireWithinTheFencingLease(t *testing.T) {
	for _, o := range []Options{{SingleWriter: true}, {SingleWriter: true, ReadOnly: true}, {}} {
		if ttl := o.attrTTL(); ttl > fenceLease {
			t.Errorf("options %+v: attributes are kept %v, longer than the fencing lease %v", o, ttl, fenceLease)
		}
	}
}
