package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is the service.name of every span preceptd exports; the
// replica is told apart by service.instance.id and precept.node.
const ServiceName = "precept"

// DefaultSampleRatio keeps every trace.
const DefaultSampleRatio = 1.0

// DefaultShutdownTimeout bounds how long Shutdown waits for the last
// spans to be exported.
const DefaultShutdownTimeout = 5 * time.Second

// tracesPath is where OTLP/HTTP receivers take traces, appended to an
// endpoint given without a path.
const tracesPath = "/v1/traces"

// Options configure New. Endpoint is required.
type Options struct {
	// Endpoint is the OTLP/HTTP receiver's URL, e.g.
	// http://collector:4318; without a path, /v1/traces is appended.
	Endpoint string
	// Headers are sent with every export request (e.g. an API key).
	Headers map[string]string
	// SampleRatio is the share of traces kept, above 0 and at most 1;
	// zero means DefaultSampleRatio. A decision's trace is kept or
	// dropped as a whole.
	SampleRatio float64
	// Node names the replica: service.instance.id and precept.node.
	Node string
	// Logger receives export errors; default discards.
	Logger *slog.Logger
}

// Tracer records preceptd's spans and exports them over OTLP/HTTP.
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// ExportURL returns the URL spans are posted to for endpoint: endpoint
// itself, or endpoint with /v1/traces when it has no path. It fails when
// endpoint is not an http(s) URL with a host.
func ExportURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL is not repeated: a mistyped one may hold a key.
		return "", errors.New("not an http(s) URL with a host")
	}
	if u.User != nil {
		return "", errors.New("the URL must not hold credentials; send them as headers")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = tracesPath
	}
	return u.String(), nil
}

// refuseRedirects keeps the export where the operator sent it: Go's
// client would carry the configured headers, API keys among them, to
// whatever host a redirect names. A redirect is answered as the failed
// export it is.
func refuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Redacted is endpoint as logs and errors show it: scheme, host and
// path, without a query or credentials that could hold a key.
func Redacted(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// New starts a tracer exporting to opts.Endpoint. It does not contact
// the receiver: spans are sent in batches, and an unreachable receiver
// costs the spans, never the work they describe.
func New(opts Options) (*Tracer, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("telemetry: an OTLP endpoint is required")
	}
	target, err := ExportURL(opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if opts.SampleRatio == 0 {
		opts.SampleRatio = DefaultSampleRatio
	}
	if opts.SampleRatio < 0 || opts.SampleRatio > 1 {
		return nil, fmt.Errorf("telemetry: sample ratio %v is not between 0 and 1", opts.SampleRatio)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	exp, err := otlptrace.New(context.Background(), &otlpHTTP{url: target, headers: opts.Headers, client: &http.Client{Timeout: exportTimeout, CheckRedirect: refuseRedirects}})
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", ServiceName),
		attribute.String("service.instance.id", opts.Node),
		attribute.String("precept.node", opts.Node),
	}
	// The SDK reports failed exports to one process-wide handler; the
	// error names the receiver and the HTTP status, never the headers.
	log := opts.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("export traces", "err", err) }))
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(opts.SampleRatio))),
		sdktrace.WithIDGenerator(decisionIDs{}),
	)
	return &Tracer{provider: provider, tracer: provider.Tracer("github.com/precept-dev/precept")}, nil
}

// Interceptor returns the Connect interceptor that gives each RPC a
// span (otelconnect): the procedure, the protocol and the status code,
// never a message. A caller's W3C traceparent links the span to the
// caller's trace; it does not become its parent, so a client cannot make
// preceptd keep traces the sample ratio would drop.
func (t *Tracer) Interceptor() (connect.Interceptor, error) {
	i, err := otelconnect.NewInterceptor(
		otelconnect.WithTracerProvider(t.provider),
		otelconnect.WithPropagator(propagation.TraceContext{}),
		otelconnect.WithoutMetrics(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: RPC interceptor: %w", err)
	}
	return i, nil
}

// Shutdown exports the spans still buffered and stops the exporter,
// waiting at most DefaultShutdownTimeout.
func (t *Tracer) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}
