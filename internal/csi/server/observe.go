package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// volumeIDer is implemented by every CSI request that names a volume.
type volumeIDer interface{ GetVolumeId() string }

// logRPC logs each RPC with its method, volume, code and duration. Successful
// calls log at debug (kubelet probes often); failures at warn.
func logRPC(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := h(ctx, req)
		attrs := []any{"method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start)}
		if v, ok := req.(volumeIDer); ok && v.GetVolumeId() != "" {
			attrs = append(attrs, "volume", v.GetVolumeId())
		}
		if err != nil {
			log.Warn("csi: rpc failed", append(attrs, "err", err)...)
		} else {
			log.Debug("csi: rpc", attrs...)
		}
		return resp, err
	}
}

// Metrics counts RPCs and their latency by method and gRPC code.
type Metrics struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

// NewMetrics registers the RPC metrics with reg.
func NewMetrics(reg prometheus.Registerer, driver string) *Metrics {
	labels := prometheus.Labels{"driver": driver}
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cellfleet_csi_rpc_total", Help: "CSI RPCs served, by method and gRPC code.", ConstLabels: labels,
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cellfleet_csi_rpc_duration_seconds", Help: "CSI RPC latency, by method.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"method"}),
	}
	reg.MustRegister(m.calls, m.latency)
	return m
}

func (m *Metrics) interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if m == nil {
			return h(ctx, req)
		}
		start := time.Now()
		resp, err := h(ctx, req)
		m.calls.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
		m.latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
		return resp, err
	}
}

// Calls returns the counter of one method and code (for tests and debugging).
func (m *Metrics) Calls(method string, code codes.Code) prometheus.Counter {
	return m.calls.WithLabelValues(method, code.String())
}
