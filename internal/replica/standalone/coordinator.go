package standalone

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cellfleet/cellfleet/internal/replica/client"
)

// Coordinator asks the volume of a generated client file which replica
// coordinates now, as its index (r0 is 0), within timeout.
func Coordinator(ctx context.Context, clientFile string, timeout time.Duration) (int, error) {
	cfg, err := client.LoadFile(clientFile)
	if err != nil {
		return 0, err
	}
	cfg.Logger = nil
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := client.Dial(cctx, cfg)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	if _, err := cl.StatFs(cctx); err != nil {
		return 0, err
	}
	var i int
	if _, err := fmt.Sscanf(strings.TrimPrefix(cl.Coordinator(), "r"), "%d", &i); err != nil {
		return 0, fmt.Errorf("coordinator ID %q: %w", cl.Coordinator(), err)
	}
	return i, nil
}
