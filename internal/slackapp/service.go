package slackapp

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/rules"
)

// API is the part of Slack's Web API precept calls; *slack.Client
// implements it.
type API interface {
	PostMessageContext(ctx context.Context, channelID string, options ...slack.MsgOption) (string, string, error)
	UpdateMessageContext(ctx context.Context, channelID, timestamp string, options ...slack.MsgOption) (string, string, string, error)
	PostEphemeralContext(ctx context.Context, channelID, userID string, options ...slack.MsgOption) (string, error)
	OpenViewContext(ctx context.Context, triggerID string, view slack.ModalViewRequest) (*slack.ViewResponse, error)
	GetPermalinkContext(ctx context.Context, params *slack.PermalinkParameters) (string, error)
	GetConversationRepliesContext(ctx context.Context, params *slack.GetConversationRepliesParameters) ([]slack.Message, bool, string, error)
	AddReactionContext(ctx context.Context, name string, item slack.ItemRef) error
}

var _ API = (*slack.Client)(nil)

// Rules is the rule manager as the Slack app uses it: decisions made in
// Slack go through the same policy as the API's (rules.Manager).
type Rules interface {
	Get(ctx context.Context, id string) (rulefmt.Proposal, error)
	List(ctx context.Context, f rules.ListFilter) ([]rulefmt.Proposal, error)
	Approve(ctx context.Context, req rules.ApproveRequest) (rulefmt.Proposal, error)
	Reject(ctx context.Context, req rules.RejectRequest) (rulefmt.Proposal, error)
}

// Clarifications is the clarification loop's domain
// (clarification.Service): where the conversation about each ambiguous
// decision stands, what to do next, and the record of every question and
// reply in the feedback store.
type Clarifications interface {
	Options() clarification.Options
	Pending(ctx context.Context) ([]evaluator.NeedsReview, error)
	Situation(ctx context.Context, id string) (clarification.Situation, error)
	Owner(ctx context.Context, thread string) (string, bool, error)
	Evaluation(ctx context.Context, id string) (evaluator.Evaluation, error)
	Asked(ctx context.Context, id, thread string, q feedbackstore.Question) (clarification.Situation, error)
	Reply(ctx context.Context, id string, r feedbackstore.Reply) (clarification.Step, clarification.Situation, bool, error)
	Leave(ctx context.Context, id string) (bool, error)
	Resolve(ctx context.Context, id string) error
	Import(ctx context.Context, rec feedbackstore.Clarification) (bool, error)
}

var _ Clarifications = (*clarification.Service)(nil)

// Features switch the Slack app's parts (docs/lifecycle.md). Off means
// nothing is sent and nothing is lost: turning Posting on posts the
// pending proposals, turning Clarification on asks about the waiting
// ambiguous decisions.
type Features struct {
	// Posting posts proposals and keeps their messages up to date.
	Posting bool
	// Clarification asks reviewers of ambiguous decisions in threads.
	Clarification bool
}

// Options configure a Service. Channel and SigningSecret are required;
// zero values of the others mean the defaults.
type Options struct {
	// Channel where proposals and clarification questions are posted.
	Channel string
	// SigningSecret verifies requests from Slack. It is never logged.
	SigningSecret string
	// Users maps Slack user ids to precept identities: only mapped users
	// may approve or reject, as that identity.
	Users map[string]string
	// Roles gives each precept identity the role the API would give it:
	// the role of that name's token. Deciding on a proposal in Slack
	// needs DecisionRole, as ApproveRule and RejectRule do over the API;
	// an identity missing here has no role and is refused
	// (docs/lifecycle.md, "Slack").
	Roles map[string]precept.Role
	// Reviewers maps the reviewer_id of decisions to Slack user ids, to
	// mention reviewers in clarification questions.
	Reviewers map[string]string
	// MaxSkew is the largest accepted distance between a signed request's
	// timestamp and now; default 5m.
	MaxSkew time.Duration
	// PostRetry caps the backoff between attempts to post or update a
	// message, and is how often every proposal's message is reconciled;
	// default 1m.
	PostRetry time.Duration
	// ScanInterval is how often the clarification scheduler looks at the
	// waiting decisions; default clarification.DefaultScanInterval.
	ScanInterval time.Duration
	// SuggestEvery is how often merge suggestions are looked for, and
	// SuggestMax how many new ones are posted each time (with curation
	// set, see SetCuration); defaults DefaultSuggestEvery and
	// DefaultSuggestMax. A negative SuggestEvery posts none, but clicks
	// on suggestions already posted are still answered.
	SuggestEvery time.Duration
	SuggestMax   int
	// ApprovalSLA is how long a proposal may wait for its approvals
	// before it is re-posted in its thread, and again that long after
	// each reminder (docs/lifecycle.md, "Approval deadlines"); default
	// rules.DefaultApprovalSLA, negative: no reminders.
	ApprovalSLA time.Duration
	// Approvers are the identities that may approve (rules.approvers), so
	// a reminder names who may still approve; empty names nobody.
	Approvers []string
	// Features; nil means posting on and clarification off.
	Features *Features
	// Impact shows each proposal's impact preview in its message; nil
	// leaves it out.
	Impact ImpactSummaries
	// AckTimeout bounds views.open, whose trigger expires 3 s after the
	// click; default 2.5s.
	AckTimeout time.Duration
	// Now is the clock; default time.Now.
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// The defaults of Options; configuration (internal/config) starts from
// them.
const (
	// DefaultMaxSkew is Slack's own advice for the age of a signed
	// request.
	DefaultMaxSkew   = 5 * time.Minute
	DefaultPostRetry = time.Minute
)

func (o Options) withDefaults() Options {
	if o.MaxSkew <= 0 {
		o.MaxSkew = DefaultMaxSkew
	}
	if o.PostRetry <= 0 {
		o.PostRetry = DefaultPostRetry
	}
	if o.ScanInterval <= 0 {
		o.ScanInterval = clarification.DefaultScanInterval
	}
	if o.SuggestEvery == 0 {
		o.SuggestEvery = DefaultSuggestEvery
	}
	if o.SuggestMax <= 0 {
		o.SuggestMax = DefaultSuggestMax
	}
	if o.ApprovalSLA == 0 {
		o.ApprovalSLA = rules.DefaultApprovalSLA
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 2500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Users = maps.Clone(o.Users)
	o.Roles = maps.Clone(o.Roles)
	o.Reviewers = maps.Clone(o.Reviewers)
	o.Approvers = slices.Clone(o.Approvers)
	return o
}

// postedTTL is how long the Store remembers where a proposal was
// posted, for a replica whose record of the post failed.
const postedTTL = 90 * 24 * time.Hour

// Service is precept's Slack app: it posts rule proposals and keeps
// their messages current, serves Slack's interactivity and Events API
// requests, and runs the clarification loop for ambiguous decisions.
// Nothing in the pipeline waits for it: Slack failures are retried with
// backoff and recorded on the proposals.
type Service struct {
	api     API
	rules   Rules
	posts   *Posts
	store   Store
	opts    Options
	log     *slog.Logger
	verify  verifier
	metrics *metrics

	// features are set from Options; tests switch them while the
	// service runs, hence the lock.
	featMu   sync.RWMutex
	features Features

	post poster
	// remind posts approval reminders.
	remind *reminders
	// clarify is nil without a clarification loop.
	clarify *clarifier
	// curation is nil without merge suggestions.
	curation Curation
	// locks serialise work on one proposal or decision in this process.
	locks [64]sync.Mutex

	// base bounds the work started by requests; Run cancels it on exit.
	base      context.Context
	cancel    context.CancelFunc
	workMu    sync.Mutex
	closed    bool
	work      sync.WaitGroup
	workSlots chan struct{}
}

// New returns a Service. clar may be nil: there is then no clarification
// loop.
func New(api API, r Rules, posts *Posts, clar Clarifications, store Store, opts Options) (*Service, error) {
	switch {
	case api == nil || r == nil || posts == nil || store == nil:
		return nil, errors.New("slack app: the Slack API, the rule manager, the post records and a store are required")
	case opts.Channel == "":
		return nil, errors.New("slack app: a channel is required")
	case opts.SigningSecret == "":
		return nil, errors.New("slack app: a signing secret is required")
	}
	opts = opts.withDefaults()
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Service{
		api: api, rules: r, posts: posts, store: store, opts: opts, log: opts.Logger, metrics: m,
		verify:    verifier{secret: []byte(opts.SigningSecret), maxSkew: opts.MaxSkew, now: opts.Now, store: store},
		features:  Features{Posting: true},
		workSlots: make(chan struct{}, 32),
	}
	if opts.Features != nil {
		s.features = *opts.Features
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.post.init()
	s.remind = newReminders(s)
	if opts.Impact != nil {
		// A preview computed in the background replaces "pending".
		opts.Impact.OnUpdate(s.post.markDirty)
	}
	if clar != nil {
		s.clarify = newClarifier(s, clar)
	}
	return s, nil
}

// Features returns the current feature switches.
func (s *Service) Features() Features {
	s.featMu.RLock()
	defer s.featMu.RUnlock()
	return s.features
}

// Run posts and updates proposal messages and runs the clarification
// scheduler until ctx is done, then waits for the work requests started.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.runPoster(ctx) }()
	go func() { defer wg.Done(); s.runSuggester(ctx) }()
	go func() {
		defer wg.Done()
		if s.clarify != nil {
			s.clarify.run(ctx)
		}
	}()
	<-ctx.Done()
	wg.Wait()
	s.shutdown()
	return nil
}

// workGrace is how long work that requests started may take to finish
// at shutdown before it is cancelled: an acknowledged click should not
// be lost to a restart.
const workGrace = 10 * time.Second

// shutdown lets the work requests started finish (within workGrace),
// then cancels what is left and waits for it.
func (s *Service) shutdown() {
	s.workMu.Lock()
	s.closed = true
	s.workMu.Unlock()
	done := make(chan struct{})
	go func() { s.work.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(workGrace):
		s.log.Warn("slack work still running at shutdown; cancelling it")
	}
	s.cancel()
	<-done
}

// async runs fn after the request that asked for it was answered: Slack
// wants an answer within 3 s, and approving, updating messages and
// re-evaluating take longer. At most 32 run at once.
func (s *Service) async(what string, fn func(ctx context.Context)) { s.spawn(what, true, fn) }

// urgent is async without waiting for a free slot, for work that must
// start at once (views.open, whose trigger expires 3 s after the click).
func (s *Service) urgent(what string, fn func(ctx context.Context)) { s.spawn(what, false, fn) }

func (s *Service) spawn(what string, limited bool, fn func(ctx context.Context)) {
	s.workMu.Lock()
	if s.closed {
		s.workMu.Unlock()
		s.log.Warn("slack work dropped: shutting down", "work", what)
		return
	}
	s.work.Add(1)
	s.workMu.Unlock()
	go func() {
		defer s.work.Done()
		if limited {
			select {
			case s.workSlots <- struct{}{}:
			case <-s.base.Done():
				return
			}
			defer func() { <-s.workSlots }()
		}
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("slack work panicked", "work", what, "panic", fmt.Sprint(r))
			}
		}()
		fn(s.base)
	}()
}

// lock serialises work on one proposal or decision id in this process.
func (s *Service) lock(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// RuleChanged is the rule manager's OnChange hook: the proposal's message
// is posted or updated soon, whoever made the change (API, CLI, git).
func (s *Service) RuleChanged(c rulefmt.Change) {
	if c.ProposalID != "" {
		s.post.markDirty(c.ProposalID)
	}
	if c.Kind == rulefmt.EvidenceAdded || c.Kind == rulefmt.RemoteSynced {
		// Evidence went to another proposal, or decisions arrived from
		// the remote: look at every message.
		s.post.reconcileSoon()
	}
}

// EvaluatorChanged is the evaluator's change hook: decisions that just
// became ambiguous are asked about soon.
func (s *Service) EvaluatorChanged(c evaluator.Change) {
	if len(c.NeedsReview) > 0 && s.clarify != nil {
		s.clarify.askSoon(c.NeedsReview)
	}
}

// Keys in the Store.
func keySeen(sig string) string      { return "seen:" + sig }
func keyEvent(id string) string      { return "event:" + id }
func keyPostClaim(id string) string  { return "post:" + id }
func keyPosted(id string) string     { return "posted:" + id }
func keyAsk(id string, n int) string { return fmt.Sprintf("ask:%d:%s", n, id) }

// keyLegacyImported marks that the conversations an older precept kept
// in the Store were imported into the feedback repository.
const keyLegacyImported = "legacy-imported"

// keyAsked holds the thread a question was posted in, until it is
// recorded.
func keyAsked(id string, n int) string { return fmt.Sprintf("asked:%d:%s", n, id) }

// tokenPattern matches Slack tokens, which must never reach a log or a
// recorded error.
var tokenPattern = regexp.MustCompile(`xox[a-z]-[A-Za-z0-9-]+`)

// errText is an error's text fit to record: Slack's error code when it
// sent one, never a token.
func errText(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && se.Err != "" {
		return se.Err
	}
	return text.Fit(tokenPattern.ReplaceAllString(err.Error(), "[redacted]"), 500)
}

// retryAfter is how long Slack asked to wait, if it rate-limited a call.
func retryAfter(err error) time.Duration {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return rl.RetryAfter
	}
	return 0
}
