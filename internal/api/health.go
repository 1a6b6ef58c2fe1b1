package api

import (
	"context"
	"time"

	"connectrpc.com/connect"

	healthv1 "github.com/precept-dev/precept/gen/grpc/health/v1"
	"github.com/precept-dev/precept/gen/grpc/health/v1/healthv1connect"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// HealthService implements the standard gRPC health protocol over the
// same readiness check as /readyz.
type HealthService struct {
	// Ready returns nil when the server can do its work.
	Ready func(ctx context.Context) error
	// WatchInterval is how often Watch re-checks; default 5s.
	WatchInterval time.Duration
}

var _ healthv1connect.HealthHandler = (*HealthService)(nil)

func (h *HealthService) status(ctx context.Context, service string) healthv1.HealthCheckResponse_ServingStatus {
	if service != "" && service != "precept.v1" && !knownService(service) {
		return healthv1.HealthCheckResponse_SERVICE_UNKNOWN
	}
	if err := h.Ready(ctx); err != nil {
		return healthv1.HealthCheckResponse_NOT_SERVING
	}
	return healthv1.HealthCheckResponse_SERVING
}

// Check reports whether the server (or one of its services) is serving.
func (h *HealthService) Check(ctx context.Context, req *connect.Request[healthv1.HealthCheckRequest]) (*connect.Response[healthv1.HealthCheckResponse], error) {
	return connect.NewResponse(&healthv1.HealthCheckResponse{Status: h.status(ctx, req.Msg.GetService())}), nil
}

// Watch sends the serving status now and whenever it changes.
func (h *HealthService) Watch(ctx context.Context, req *connect.Request[healthv1.HealthCheckRequest], stream *connect.ServerStream[healthv1.HealthCheckResponse]) error {
	interval := h.WatchInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	last := healthv1.HealthCheckResponse_ServingStatus(-1)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if s := h.status(ctx, req.Msg.GetService()); s != last {
			if err := stream.Send(&healthv1.HealthCheckResponse{Status: s}); err != nil {
				return err
			}
			last = s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ServiceNames lists the services preceptd serves, for reflection and
// health checks.
var ServiceNames = []string{
	preceptv1connect.FeedbackServiceName,
	preceptv1connect.EvaluatorServiceName,
	preceptv1connect.RuleServiceName,
	preceptv1connect.PromptServiceName,
	preceptv1connect.AnalyticsServiceName,
	preceptv1connect.EffectServiceName,
	preceptv1connect.ExportServiceName,
	preceptv1connect.PingServiceName,
	healthv1connect.HealthName,
}

func knownService(name string) bool {
	for _, s := range ServiceNames {
		if s == name {
			return true
		}
	}
	return false
}
