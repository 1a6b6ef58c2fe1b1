package console

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// clients call precept's RPCs in process. Requests carry the visitor's
// identity in their context (api.InProcess), and the RPCs' interceptors
// check its role as they would a token's.
type clients struct {
	rules     preceptv1connect.RuleServiceClient
	evaluator preceptv1connect.EvaluatorServiceClient
	feedback  preceptv1connect.FeedbackServiceClient
	effects   preceptv1connect.EffectServiceClient
	prompts   preceptv1connect.PromptServiceClient
	analytics preceptv1connect.AnalyticsServiceClient
}

// inProcessURL is the base URL of in-process calls; nothing resolves it.
const inProcessURL = "http://precept.in-process"

func newClients(h http.Handler) clients {
	hc := &http.Client{Transport: inProcess{h}}
	// Binary protobuf, the clients' default: the cheapest to encode. No
	// compression: the bytes never leave the process, and gzipping every
	// response cost the review queue a fifth of its server time
	// (BenchmarkConsolePages, docs/console.md "Performance").
	opts := []connect.ClientOption{connect.WithAcceptCompression("gzip", nil, nil)}
	return clients{
		rules:     preceptv1connect.NewRuleServiceClient(hc, inProcessURL, opts...),
		evaluator: preceptv1connect.NewEvaluatorServiceClient(hc, inProcessURL, opts...),
		feedback:  preceptv1connect.NewFeedbackServiceClient(hc, inProcessURL, opts...),
		effects:   preceptv1connect.NewEffectServiceClient(hc, inProcessURL, opts...),
		prompts:   preceptv1connect.NewPromptServiceClient(hc, inProcessURL, opts...),
		analytics: preceptv1connect.NewAnalyticsServiceClient(hc, inProcessURL, opts...),
	}
}

// inProcess is an http.RoundTripper that serves a request with a
// handler in the same process; unary RPCs only.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &responseBuffer{header: http.Header{}}
	t.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       r,
	}, nil
}

// responseBuffer collects a handler's answer.
type responseBuffer struct {
	header http.Header
	sent   http.Header
	status int
	body   bytes.Buffer
}

func (w *responseBuffer) Header() http.Header { return w.header }

func (w *responseBuffer) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	w.sent = w.header.Clone()
}

func (w *responseBuffer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.body.Write(b)
}
