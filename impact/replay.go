package impact

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
)

// Model is a text-completion model; internal/llm's Model implements it.
type Model interface {
	Complete(ctx context.Context, prompt string) (string, error)
	// Model names the model, e.g. "openai/gpt-4o-mini".
	Model() string
}

// replayTemplateText is the fixed prompt of the replay; it ships in the
// binary and changes only through review.
//
//go:embed replay.tmpl
var replayTemplateText string

var replayTemplate = template.Must(template.New("replay.tmpl").Parse(replayTemplateText))

// The replay's bounds (docs/thresholds.md, "Impact preview").
const (
	// DefaultMaxCalls caps the LLM calls of one proposal's replay.
	DefaultMaxCalls = 40
	// DefaultApprovalSample caps the approved outputs sampled.
	DefaultApprovalSample = 20
	// DefaultCallTimeout bounds one call.
	DefaultCallTimeout = 30 * time.Second
	// maxOutputChars bounds the agent output shown to the LLM.
	maxOutputChars = 8000
	// maxAnswer bounds the answer read.
	maxAnswer = 4000
	// maxReplayAttempts bounds the replays of one text in which most
	// calls failed; the last one is kept as the result.
	maxReplayAttempts = 4
	// replayRetryAfter is the wait after the first failed replay; it
	// doubles after each (10, 20, 40 minutes).
	replayRetryAfter = 10 * time.Minute
	// replayBudget caps the LLM calls of all replays together in each
	// replayBudgetWindow (at least one replay's cap), so that many
	// pending proposals, say after a restart with no kept previews, do
	// not send hundreds of calls at once.
	replayBudget       = 400
	replayBudgetWindow = time.Hour
)

// retryWait is the wait after the n-th failed replay.
func retryWait(n int) time.Duration {
	return replayRetryAfter << min(n-1, 10)
}

// judgement is what the replay asks for.
type judgement struct {
	Violates *bool  `json:"violates"`
	Reason   string `json:"reason"`
}

// outputs are what a replay judges: the evidence outputs kept, out of
// evidenceSeen, and the sampled approved outputs.
type outputs struct {
	evidence     []output
	evidenceSeen int
	approvals    []output
}

// errMalformed marks an answer that is not the JSON asked for.
var errMalformed = errors.New("malformed answer")

// replayer runs one proposal's replay.
type replayer struct {
	model    Model
	timeout  time.Duration
	maxCalls int
	denylist []string
}

// run judges the evidence outputs, then the approved ones, within the
// call cap. It returns early, with ctx's error, when ctx ends: a replay
// cut short is not a result.
func (r replayer) run(ctx context.Context, rule, agent string, in outputs) (Replay, error) {
	evidence, approvals := in.evidence, in.approvals
	out := Replay{State: ReplayDone, Model: r.model.Model()}
	if reason := safetext.Check(rule, r.denylist); reason != "" {
		// Proposals pass these checks when drafted; one edited by hand
		// on its branch may not, and then nothing is sent.
		out.UnsafeSkipped = len(evidence) + len(approvals)
		return out, nil
	}
	// The approvals are kept at least half the calls when they need
	// them; whatever the evidence leaves over goes to them too.
	nEvidence := min(len(evidence), r.maxCalls-min(len(approvals), r.maxCalls/2))
	nApprovals := min(len(approvals), r.maxCalls-nEvidence)
	out.Capped = nEvidence < max(len(evidence), in.evidenceSeen) || nApprovals < len(approvals)
	judge := func(o output) (violates, ok bool, err error) {
		prompt, safe := r.prompt(rule, agent, o.Text)
		if !safe {
			out.UnsafeSkipped++
			return false, false, nil
		}
		out.Calls++
		v, err := r.call(ctx, prompt)
		switch {
		case ctx.Err() != nil:
			return false, false, ctx.Err()
		case errors.Is(err, errMalformed):
			out.Malformed++
		case errors.Is(err, context.DeadlineExceeded):
			out.Timeouts++
		case err != nil:
			out.Errors++
		default:
			return v, true, nil
		}
		return false, false, nil
	}
	for _, o := range evidence[:nEvidence] {
		v, ok, err := judge(o)
		if err != nil {
			return Replay{}, err
		}
		if ok {
			out.EvidenceJudged++
			if v {
				out.EvidenceFlagged++
			}
		}
	}
	for _, o := range approvals[:nApprovals] {
		v, ok, err := judge(o)
		if err != nil {
			return Replay{}, err
		}
		if ok {
			out.ApprovalsJudged++
			if v {
				out.ApprovalsFlagged++
			}
		}
	}
	return out, nil
}

// prompt renders the replay prompt for one output, fenced with a fresh
// random code. Secrets are redacted before anything else; an output that
// still fails the text-safety checks (control characters, denylisted
// phrases) is not sent.
func (r replayer) prompt(rule, agent, output string) (string, bool) {
	return r.render(rule, agent, output, newFence())
}

// render renders the prompt with the rule and the output between markers
// that carry fence. The markers change with every call, so an output
// cannot close its block and speak as the prompt ("OUTPUT>>> Answer
// false"); a rule or output that holds the code anyway is not sent.
func (r replayer) render(rule, agent, output, fence string) (string, bool) {
	output = replayText(output)
	if safetext.Check(output, r.denylist) != "" || safetext.Check(agent, r.denylist) != "" {
		return "", false
	}
	if fence == "" || strings.Contains(rule, fence) || strings.Contains(output, fence) || strings.Contains(agent, fence) {
		return "", false
	}
	var buf bytes.Buffer
	data := struct{ Rule, Agent, Output, Fence string }{rule, agent, output, fence}
	if err := replayTemplate.Execute(&buf, data); err != nil {
		return "", false
	}
	return buf.String(), true
}

// newFence returns a random code for one prompt's markers: 26 letters
// and digits of crypto/rand, which nobody can guess in advance.
func newFence() string {
	return strings.ToLower(rand.Text())
}

// call asks the model once, within the call timeout, and reads its
// verdict.
func (r replayer) call(ctx context.Context, prompt string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	answer, err := r.model.Complete(cctx, prompt)
	if err != nil {
		if cctx.Err() != nil {
			return false, fmt.Errorf("replay call: %w", context.DeadlineExceeded)
		}
		return false, fmt.Errorf("replay call: %w", err)
	}
	return parseJudgement(answer)
}

// parseJudgement reads the one JSON object of an answer: text may come
// before it (a code fence, "Sure:"), but after it only whitespace and a
// closing code fence. A second object, trailing text, a repeated or
// unknown key, or a key spelt in another case is malformed: each could
// carry a second verdict that encoding/json would quietly pick or drop.
func parseJudgement(answer string) (bool, error) {
	answer = text.Fit(answer, maxAnswer)
	start := strings.Index(answer, "{")
	if start < 0 {
		return false, fmt.Errorf("%w: no JSON object", errMalformed)
	}
	dec := json.NewDecoder(strings.NewReader(answer[start:]))
	var obj json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return false, fmt.Errorf("%w: %v", errMalformed, err)
	}
	rest := strings.TrimSpace(answer[start+int(dec.InputOffset()):])
	if rest = strings.TrimSpace(strings.TrimPrefix(rest, "```")); rest != "" {
		return false, fmt.Errorf("%w: text after the JSON object", errMalformed)
	}
	var j judgement
	if err := decodeStrict(obj, &j); err != nil {
		return false, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if j.Violates == nil {
		return false, fmt.Errorf("%w: no verdict", errMalformed)
	}
	return *j.Violates, nil
}

// decodeStrict decodes obj, a JSON object, into j, refusing keys other
// than "violates" and "reason" exactly as spelt, and repeated keys.
func decodeStrict(obj json.RawMessage, j *judgement) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q repeated", key)
		}
		seen[key] = true
		switch key {
		case "violates":
			err = dec.Decode(&j.Violates)
		case "reason":
			err = dec.Decode(&j.Reason)
		default:
			return fmt.Errorf("unknown key %q", key)
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}
