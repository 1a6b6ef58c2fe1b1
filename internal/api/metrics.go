package api

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricsInterceptor counts RPCs by procedure and code and times them.
type MetricsInterceptor struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

var _ connect.Interceptor = (*MetricsInterceptor)(nil)

// NewMetricsInterceptor registers the RPC metrics on reg.
func NewMetricsInterceptor(reg prometheus.Registerer) *MetricsInterceptor {
	m := &MetricsInterceptor{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_rpc_requests_total",
			Help: "RPCs handled, by procedure and result code.",
		}, []string{"procedure", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "precept_rpc_duration_seconds",
			Help:    "Time to handle an RPC (unary) or the life of a stream.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"procedure"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}

// Expect creates the series of procedures before their first call: a
// labelled vector with no children exports nothing, and the dashboard and
// alerts in deploy/ read BuildPrompt's latency from the start.
func (m *MetricsInterceptor) Expect(procedures ...string) *MetricsInterceptor {
	for _, p := range procedures {
		m.requests.WithLabelValues(p, "ok")
		m.duration.WithLabelValues(p)
	}
	return m
}

func (m *MetricsInterceptor) observe(procedure string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
		var ce *connect.Error
		if !errors.As(err, &ce) {
			code = connect.CodeUnknown.String()
		}
	}
	m.requests.WithLabelValues(procedure, code).Inc()
	m.duration.WithLabelValues(procedure).Observe(time.Since(start).Seconds())
}

// WrapUnary implements connect.Interceptor.
func (m *MetricsInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		m.observe(req.Spec().Procedure, start, err)
		return resp, err
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (m *MetricsInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (m *MetricsInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		m.observe(conn.Spec().Procedure, start, err)
		return err
	}
}
