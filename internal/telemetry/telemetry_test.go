package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestDecisionTraceIDIsDerivedFromTheDecisionIDAlone(t *testing.T) {
	a, b := DecisionTraceID("d-1"), DecisionTraceID("d-1")
	if a != b || !a.IsValid() {
		t.Fatalf("DecisionTraceID(d-1) = %s then %s", a, b)
	}
	if DecisionTraceID("d-2") == a {
		t.Fatal("two decisions share a trace id")
	}
	// Pinned (printf 'precept decision d-1' | sha256sum): replicas of
	// different versions, and producers, must agree.
	if got := DecisionTraceID("d-1").String(); got != "e3baad5d8216d1bcf9597d7b4d349733" {
		t.Fatalf("DecisionTraceID(d-1) = %s", got)
	}
	ids := decisionIDs{}
	tid, sid := ids.NewIDs(context.WithValue(context.Background(), decisionKey{}, "d-1"))
	if tid != a || !sid.IsValid() {
		t.Fatalf("NewIDs for d-1 = %s/%s, want trace %s", tid, sid, a)
	}
	other, _ := ids.NewIDs(context.Background())
	if other == a || !other.IsValid() {
		t.Fatalf("NewIDs without a decision = %s", other)
	}
}

func TestExportURLAddsTheTracesPathOnlyWhenThereIsNone(t *testing.T) {
	for in, want := range map[string]string{
		"http://collector:4318":             "http://collector:4318/v1/traces",
		"http://collector:4318/":            "http://collector:4318/v1/traces",
		"https://otlp.example.com/api/v1/t": "https://otlp.example.com/api/v1/t",
	} {
		if got, err := ExportURL(in); err != nil || got != want {
			t.Errorf("ExportURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "collector:4318", "ftp://x", "http://u:p@collector:4318"} {
		if _, err := ExportURL(bad); err == nil {
			t.Errorf("ExportURL(%q) accepted", bad)
		}
	}
}

func TestNewRefusesWhatItCannotExportTo(t *testing.T) {
	for _, o := range []Options{{}, {Endpoint: "collector:4318"}, {Endpoint: "http://c:4318", SampleRatio: 2}} {
		if tr, err := New(o); err == nil {
			tr.Shutdown()
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestExportNeverFollowsARedirectWithItsHeaders: a receiver that
// redirects must not hand the configured headers (API keys) to the host
// it names; the export fails instead, and the error shows the endpoint
// without its query.
func TestExportNeverFollowsARedirectWithItsHeaders(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			leaked.Add(1)
		}
	}))
	defer elsewhere.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/v1/traces", http.StatusTemporaryRedirect)
	}))
	defer receiver.Close()
	c := &otlpHTTP{url: receiver.URL + "/v1/traces?key=query-secret", headers: map[string]string{"X-Api-Key": "header-secret"},
		client: &http.Client{Timeout: exportTimeout, CheckRedirect: refuseRedirects}}
	err := c.UploadTraces(context.Background(), nil)
	if err == nil {
		t.Fatal("an export answered by a redirect succeeded")
	}
	if n := leaked.Load(); n != 0 {
		t.Fatalf("the redirect's target got the API key %d times", n)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("the error shows a secret: %v", err)
	}
}
