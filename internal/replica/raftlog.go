package replica

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// raftLogger routes hashicorp/raft's hclog output into the worker's slog
// logger, so raft's lines carry the volume and replica attributes like the
// rest. hclog writes one JSON object per line; each becomes a slog record.
func raftLogger(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "raft",
		Level:      hclog.Warn,
		JSONFormat: true,
		Output:     slogWriter{log: log},
	})
}

type slogWriter struct{ log *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	var rec map[string]any
	if err := json.Unmarshal(p, &rec); err != nil {
		s.log.Warn(string(p))
		return len(p), nil
	}
	level := slog.LevelInfo
	switch rec["@level"] {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	msg, _ := rec["@message"].(string)
	attrs := make([]slog.Attr, 0, len(rec))
	for k, v := range rec {
		switch k {
		case "@level", "@message", "@timestamp", "@caller":
		default:
			attrs = append(attrs, slog.Any(k, v))
		}
	}
	s.log.LogAttrs(context.Background(), level, msg, attrs...)
	return len(p), nil
}
