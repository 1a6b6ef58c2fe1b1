package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

func TestRepositoriesAreMaintainedWhileDecisionsArrive(t *testing.T) {
	// 300 single decisions used to leave over 2,000 loose objects, and
	// 64k decisions 237 packfiles, because nothing ever maintained the
	// repository.
	r := start(t, `maintenance: {interval: 100ms, max_loose: 60, max_packs: 4}`)
	client := feedbackClient(r.app.URL(), "connect", "")
	for i := range 300 {
		d := protoDecision(fmt.Sprintf("m-%03d", i))
		if _, err := client.RecordFeedback(context.Background(), connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: d})); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the feedback repository to be maintained", 30*time.Second, func() bool {
		st, err := r.app.FeedbackRepo.Stats()
		return err == nil && st.Loose <= 60 && st.Packs <= 4
	})
	if !strings.Contains(r.logs.String(), "repository maintained") {
		t.Fatalf("no maintenance was logged:\n%s", r.logs.String())
	}
	n, err := r.app.Feedback.Count()
	if err != nil || n != 300 {
		t.Fatalf("stored = %d, %v", n, err)
	}
	resp, err := http.Get(r.app.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	for _, want := range []string{`precept_git_loose_objects{repo="feedback"}`, `precept_git_maintenance_total{outcome="rewrote",repo="feedback"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// git fsck lists packs once: a commit made while it runs (the evaluator
	// documents edge cases after the decisions) would look missing.
	r.stop()
	out, err := exec.Command("git", "-C", r.app.FeedbackRepo.Path(), "fsck", "--strict", "--no-dangling").CombinedOutput()
	if err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
}
