package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exportTimeout bounds one export request.
const exportTimeout = 10 * time.Second

// otlpHTTP is the OTLP/HTTP client under otlptrace's exporter: it posts
// each batch as binary protobuf to the receiver's /v1/traces.
//
// It stands in for otlptracehttp, which cannot be linked into preceptd:
// otlptracehttp imports the collector's Go package, whose grpc-gateway
// file imports grpc's health service, and that registers
// grpc/health/v1/health.proto a second time beside gen/grpc/health/v1,
// so preceptd would panic at start (docs/telemetry.md). The request body
// is tracepb.TracesData, which OTLP defines with the same field (1:
// repeated ResourceSpans) as ExportTraceServiceRequest.
type otlpHTTP struct {
	url     string
	headers map[string]string
	client  *http.Client
}

func (c *otlpHTTP) Start(context.Context) error { return nil }

func (c *otlpHTTP) Stop(context.Context) error {
	c.client.CloseIdleConnections()
	return nil
}

// UploadTraces posts spans once; a batch the receiver refuses is dropped
// and reported through the SDK's error handler.
func (c *otlpHTTP) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: spans})
	if err != nil {
		return fmt.Errorf("encode spans: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("export spans: %w", err)
	}
	for name, value := range c.headers {
		req.Header.Set(name, value)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "preceptd")
	resp, err := c.client.Do(req)
	if err != nil {
		// A *url.Error repeats the whole URL; name it redacted instead.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("export spans to %s: %w", Redacted(c.url), err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("export spans: %s answered %s", Redacted(c.url), resp.Status)
	}
	return nil
}
