package controller_test

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestGetCapacityIsTheLargestVolumeRDistinctNodesCanHold(t *testing.T) {
	h := serve(t, 200*time.Millisecond)
	class := backingClass(t, true)
	publishCapacity(t, class, 10*gi, 4*gi, 8*gi)
	for _, tc := range []struct {
		replicas string
		want     int64
	}{{"1", 10 * gi}, {"2", 8 * gi}, {"3", 4 * gi}, {"4", 0}, {"", 4 * gi /* the default three */}} {
		params := map[string]string{"backingStorageClassName": class}
		if tc.replicas != "" {
			params["replicas"] = tc.replicas
		}
		resp, err := h.ctrl.GetCapacity(testContext(t), &csi.GetCapacityRequest{Parameters: params})
		if err != nil || resp.GetAvailableCapacity() != tc.want || resp.GetMaximumVolumeSize().GetValue() != tc.want {
			t.Fatalf("GetCapacity for replicas=%q on nodes of 10, 4 and 8 GiB must answer %d bytes, got %v (%v)", tc.replicas, tc.want, resp, err)
		}
	}
	resp, err := h.ctrl.GetCapacity(testContext(t), &csi.GetCapacityRequest{})
	if err != nil || resp.GetAvailableCapacity() != 0 {
		t.Fatalf("GetCapacity without a backing class must answer 0 (nothing can be provisioned), got %v (%v)", resp, err)
	}
	_, err = h.ctrl.GetCapacity(testContext(t), &csi.GetCapacityRequest{Parameters: map[string]string{"backingStorageClassName": class, "replcas": "3"}})
	expectCode(t, "GetCapacity with a parameter typo", err, codes.InvalidArgument, `"replcas"`)
	silent := backingClass(t, true)
	_, err = h.ctrl.GetCapacity(testContext(t), &csi.GetCapacityRequest{Parameters: map[string]string{"backingStorageClassName": silent}})
	expectCode(t, "GetCapacity of a backing class that publishes no capacity", err, codes.Unavailable, silent, "--enable-capacity")
}
