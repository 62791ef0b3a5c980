package client

// Fencing (docs/replica-engine.md, "Fencing"). A single-writer mount opens a
// fencing epoch before it serves anything; from then on every call of this
// client carries the epoch, and once a newer mount opens the next one the
// volume refuses this client's mutations and reads with ErrFenced. The
// refusal is final: the client reports it on Fenced() and every later call
// fails the same way without retrying.

import (
	"context"
	"fmt"

	"github.com/cellfleet/cellfleet/internal/replica/wire"
)

// OpenFence opens the volume's next fencing epoch for this client and
// returns it. Every single-writer session the volume knows with a lower
// epoch is fenced from the moment the entry commits. Exactly-once like any
// mutation: a retry after a lost reply returns the same epoch.
func (c *Client) OpenFence(ctx context.Context) (uint64, error) {
	res, err := c.mutate(ctx, []wire.Op{{Kind: wire.KindFence}})
	if err != nil {
		return 0, fmt.Errorf("open a fencing epoch: %w", err)
	}
	if err := res[0].Err(); err != nil {
		return 0, fmt.Errorf("open a fencing epoch: %w", err)
	}
	c.mu.Lock()
	c.epoch = res[0].N
	c.mu.Unlock()
	c.log.Info("fencing epoch opened", "epoch", res[0].N)
	return res[0].N, nil
}

// Epoch returns the fencing epoch this client's calls carry (0: unfenced).
func (c *Client) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// Fenced is closed once the volume has refused a call of this client
// because a newer single-writer mount fenced it.
func (c *Client) Fenced() <-chan struct{} { return c.fenced }

// markFenced records the volume's refusal; every later call fails at once.
func (c *Client) markFenced(msg string) error {
	c.fenceOnce.Do(func() {
		c.log.Error("fenced: a newer single-writer mount of the volume took over; every further call fails",
			"epoch", c.Epoch(), "reason", msg)
		close(c.fenced)
	})
	return fmt.Errorf("%w (epoch %d): %s", ErrFenced, c.Epoch(), msg)
}

// isFenced reports whether a refusal was already seen.
func (c *Client) isFenced() bool {
	select {
	case <-c.fenced:
		return true
	default:
		return false
	}
}
