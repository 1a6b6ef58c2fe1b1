package slackapp

import (
	"sync"
	"testing"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// summaries hands out one line per proposal, as the impact service
// does: pending until its background computation is done.
type summaries struct {
	mu     sync.Mutex
	lines  map[string]string
	update func(string)
}

func (s *summaries) OnUpdate(fn func(string)) { s.update = fn }

func (s *summaries) Summary(p rulefmt.Proposal) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.lines[p.ID]; ok {
		return l
	}
	return "Impact preview pending"
}

func (s *summaries) set(id, line string) {
	s.mu.Lock()
	s.lines[id] = line
	s.mu.Unlock()
}

func TestTheMessageShowsTheImpactPreviewAndIsUpdatedWhenItIsComputed(t *testing.T) {
	im := &summaries{lines: map[string]string{}}
	e := newEnv(t, envConfig{impact: im})
	p := e.propose("Always set a timeout on outbound HTTP calls.")
	msg := e.posted(p.ID)
	if !msg.Shows("*Impact* Impact preview pending") {
		t.Fatalf("message lacks the pending preview:\n%v", msg.Strings())
	}
	const line = "Addresses 14 past negatives (3 agents, 5 epics) · could over-correct 6 of 40 approvals in scope · similar: r-1a2b · LLM replay: precision 0.83 (n=12) recall 0.75 (n=8)"
	im.set(p.ID, line+" <!channel>")
	if im.update == nil {
		t.Fatal("the Slack app does not follow preview updates")
	}
	im.update(p.ID)
	eventually(t, "the message to show the computed preview", func() bool {
		return e.message(p.ID).Shows("*Impact* " + line)
	})
	if m := e.message(p.ID); m.Shows("<!channel>") || m.TS != msg.TS {
		t.Errorf("the update mentions the channel or posted a new message: %v", m.Strings())
	}
	if e.get(p.ID).Revision != p.Revision {
		t.Error("showing the preview changed the proposal's revision")
	}
}
