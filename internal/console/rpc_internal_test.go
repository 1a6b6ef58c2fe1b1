package console

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// TestInProcessCallsAreNotCompressed: the console's RPCs never leave the
// process, so the clients must not ask for gzipped answers — compressing
// every response cost the review queue a fifth of its server time
// (docs/console.md, "Performance").
func TestInProcessCallsAreNotCompressed(t *testing.T) {
	var asked []string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"Accept-Encoding", "Connect-Accept-Encoding", "Grpc-Accept-Encoding"} {
			asked = append(asked, r.Header.Values(h)...)
		}
		http.Error(w, "recorded", http.StatusTeapot)
	})
	c := newClients(api)
	if _, err := c.rules.GetRule(context.Background(), connect.NewRequest(&preceptv1.GetRuleRequest{RuleId: "r-x"})); err == nil {
		t.Fatal("the recording handler answered with an error; the call succeeded")
	}
	if len(asked) == 0 {
		t.Fatal("the call reached the handler with no encoding header at all; the test no longer sees what it checks")
	}
	for _, v := range asked {
		if strings.Contains(v, "gzip") {
			t.Errorf("an in-process call asks for gzip (%q): every response would be compressed and decompressed in the same process", v)
		}
	}
}
