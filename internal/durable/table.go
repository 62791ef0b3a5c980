package durable

import (
	"fmt"
	"sort"
)

// Table is a driver's durable record of its volumes by ID, stored as
// {"volumes": {...}} in one file written with WriteJSON.
type Table[V any] struct {
	path    string
	what    string        // names the table in errors
	Volumes map[string]*V `json:"volumes"`
}

// LoadTable reads the table at path (empty when the file does not exist);
// what names it in errors ("local driver state").
func LoadTable[V any](path, what string) (*Table[V], error) {
	t := &Table[V]{path: path, what: what}
	if _, err := ReadJSON(path, t); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if t.Volumes == nil {
		t.Volumes = map[string]*V{}
	}
	return t, nil
}

// Save persists the table atomically and durably.
func (t *Table[V]) Save() error {
	if err := WriteJSON(t.path, t); err != nil {
		return fmt.Errorf("persist %s: %w", t.what, err)
	}
	return nil
}

// SortedIDs returns the volume IDs in order.
func (t *Table[V]) SortedIDs() []string {
	ids := make([]string, 0, len(t.Volumes))
	for id := range t.Volumes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
