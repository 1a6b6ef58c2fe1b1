package telemetry

import (
	"context"
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
