package local_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestListVolumesPagesWithoutDuplicatesWhenVolumesChangeBetweenPages covers
// what csi-sanity leaves pending: a page's last volume deleted and a new
// one created before the next page is read.
func TestListVolumesPagesWithoutDuplicatesWhenVolumesChangeBetweenPages(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.create(t, fmt.Sprintf("list-%d", i))
	}
	ctx := context.Background()
	first, err := f.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2})
	if err != nil || len(first.GetEntries()) != 2 || first.GetNextToken() == "" {
		t.Fatalf("a first page of 2 must come with a next token, got %v (%v)", first, err)
	}
	seen := map[string]bool{}
	for _, e := range first.GetEntries() {
		seen[e.GetVolume().GetVolumeId()] = true
		if err := f.delete(e.GetVolume().GetVolumeId()); err != nil {
			t.Fatal(err)
		}
	}
	f.create(t, "list-new")
	rest, err := f.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: first.GetNextToken()})
	if err != nil {
		t.Fatalf("a token whose volume was deleted must still be accepted: %v", err)
	}
	for _, e := range rest.GetEntries() {
		if seen[e.GetVolume().GetVolumeId()] {
			t.Fatalf("the next page must not repeat %s", e.GetVolume().GetVolumeId())
		}
	}
	if len(rest.GetEntries()) < 3 {
		t.Fatalf("the volumes after the token must all be listed, got %d", len(rest.GetEntries()))
	}
	_, err = f.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "../../etc"})
	expectCode(t, "ListVolumes with a token it never issued", err, codes.Aborted)
}
