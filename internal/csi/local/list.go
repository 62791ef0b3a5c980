package local

import (
	"context"
	"regexp"
	"sort"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// idPattern is the form volumeID produces; a starting token is an ID.
var idPattern = regexp.MustCompile(`^lv-[0-9a-f]{32}$`)

// ListVolumes pages through this node's volumes in ID order. The token is
// the last ID of the previous page, so deleting or adding volumes between
// pages never yields duplicates.
func (c *Controller) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	d := c.d
	token := req.GetStartingToken()
	if token != "" && !idPattern.MatchString(token) {
		return nil, status.Errorf(codes.Aborted, "ListVolumes: starting_token %q was not issued by this plugin", token)
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "ListVolumes: max_entries must not be negative")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]string, 0, len(d.state.Volumes))
	for id := range d.state.Volumes {
		if id > token {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	resp := &csi.ListVolumesResponse{}
	if n := int(req.GetMaxEntries()); n > 0 && len(ids) > n {
		ids = ids[:n]
		resp.NextToken = ids[n-1]
	}
	for _, id := range ids {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: d.csiVolume(d.state.Volumes[id])})
	}
	return resp, nil
}
