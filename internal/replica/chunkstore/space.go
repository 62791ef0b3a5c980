package chunkstore

// Space a deletion left that only kept manifests still hold: the chunks of
// deleted files, and of ranges truncated or punched away. They are freed
// once no kept manifest names them, so the worker takes a checkpoint when
// they pass a bound and an idle volume gives deleted files' space back
// (docs/replica-engine.md, "Chunk store"). Older versions of chunks the
// live files still hold are not counted: a checkpoint frees them but the
// next writes copy those chunks again, so checkpointing for them would
// only multiply the copies of a random-write workload.

// Orphaned returns the bytes of the chunks that kept manifests name at
// positions (inode, chunk index) the live files no longer hold, each chunk
// counted once.
func (s *Store) Orphaned() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[chunkKey]struct{}{}
	var held uint64
	for _, m := range s.kept {
		for _, e := range m.Entries {
			k := chunkKey{e.Ino, e.Index, e.Version}
			if _, ok := seen[k]; ok {
				continue
			}
			seen[k] = struct{}{}
			if fm := s.files[e.Ino]; fm != nil && fm.get(e.Index).n > 0 {
				continue
			}
			held += uint64(e.Len)
		}
	}
	return held
}
