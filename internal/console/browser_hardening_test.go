package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// Written in review (ui-review): a note typed on a proposal page survives
// a live reload once the visitor has moved on to the Approve button, and
// the keyboard focus stays on that button. console.js only holds back a
// reload while focus is inside a field, then swaps #main, dropping the
// typed text and the focus.
func TestALiveReloadKeepsATypedNoteAndTheFocus(t *testing.T) {
	s := startServer(t, "")
	resp, err := s.rules("").ProposeRule(context.Background(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Always write tests for retries.", Rationale: "seen often",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetProposal().GetProposalId()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath("/usr/bin/chromium"), chromedp.NoSandbox, chromedp.Headless)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	if err := chromedp.Do(ctx, chromedp.Navigate(s.url+"/ui/proposals/"+id)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS("#approve-note")),
		chromedp.Sleep(500*time.Millisecond), // EventSource connects
		chromedp.SendKeys(chromedp.CSS("#approve-note"), "checked the retry helper"),
		chromedp.Focus(chromedp.CSS("#approve-button")), // as Tab would
	); err != nil {
		t.Fatal(err)
	}
	s.app.Console.Changed("rules")
	// A reload takes a few milliseconds; a page that holds it back (or
	// swaps and restores) passes either way.
	if err := chromedp.Do(ctx, chromedp.Sleep(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	updated, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.updated || ""`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("content swapped: %v", updated != "")
	note, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#approve-note")))
	if err != nil {
		t.Fatal(err)
	}
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement ? (document.activeElement.id || document.activeElement.tagName) : ""`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(note, "checked the retry helper") {
		t.Errorf("after a live reload the typed note is %q", note)
	}
	if focused != "approve-button" {
		t.Errorf("after a live reload the focus is on %q, not the Approve button", focused)
	}
}
