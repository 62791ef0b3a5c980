//go:build race

package wire

// raceEnabled: sync.Pool drops a random share of Puts under the race
// detector, so allocation counts of pooled paths mean nothing there.
const raceEnabled = true
