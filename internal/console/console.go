// Package console serves precept's web console at /ui/ on the API port
// (docs/console.md): the review queue, clusters, rules and their effect,
// the prompt explorer, analytics, decisions that need review and dead
// letters.
//
// Pages are rendered on the server from templates written here, with
// charts drawn by gonum/plot. Every read and every change goes through
// precept's own RPC handlers, called in process with the signed-in
// identity (api.InProcess): an approval from the console meets exactly
// the checks one from the API or Slack meets.
package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/internal/api"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// Options configures a console. Auth, API and Redis are required.
type Options struct {
	// Auth maps tokens to identities; with no tokens every visitor is the
	// local admin and needs no sign-in (api.LocalIdentity).
	Auth *api.Authenticator
	// API serves precept's RPCs. It is called in process, behind no
	// network guard: the RPCs' own interceptors authorize each call.
	API http.Handler
	// Redis keeps the sessions, so any replica serves a signed-in user and
	// a revoked session is revoked everywhere.
	Redis redis.UniversalClient
	// KeyPrefix starts the Redis keys of sessions.
	KeyPrefix string
	// SessionIdle and SessionMax bound a session's life (config ui.*).
	SessionIdle time.Duration
	SessionMax  time.Duration
	// MaxSessionsPerIdentity bounds one identity's sessions: a sign-in
	// past it ends that identity's oldest (ui.max_sessions_per_identity).
	MaxSessionsPerIdentity int
	// MaxStreamsPerIdentity bounds the event streams one identity holds
	// on this replica (ui.max_streams_per_identity).
	MaxStreamsPerIdentity int
	// SecureCookies marks cookies Secure on plain HTTP as well.
	SecureCookies bool
	// CommitURL, when set, is the rules repository's web address of a
	// commit without its sha (".../commit/"): history links to it.
	CommitURL string
	Log       *slog.Logger
	Now       func() time.Time
}

func (o Options) withDefaults() Options {
	if o.SessionIdle <= 0 {
		o.SessionIdle = 8 * time.Hour
	}
	if o.SessionMax <= 0 {
		o.SessionMax = 7 * 24 * time.Hour
	}
	if o.MaxSessionsPerIdentity <= 0 {
		o.MaxSessionsPerIdentity = 20
	}
	if o.MaxStreamsPerIdentity <= 0 {
		o.MaxStreamsPerIdentity = 16
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "precept:ui:"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Console is the web console's HTTP handler.
type Console struct {
	opts Options
	// acc signs visitors in and finds who each request comes from.
	acc    *accounts
	rpc    clients
	events *hub
	// draws keeps the analytics charts drawn.
	draws drawCache
	mux   *http.ServeMux
	renderer
}

// New returns a console; mount it at Prefix.
func New(opts Options) (*Console, error) {
	if opts.Auth == nil || opts.API == nil || opts.Redis == nil {
		return nil, errors.New("console: Auth, API and Redis are required")
	}
	opts = opts.withDefaults()
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	out := renderer{pages: pages, log: opts.Log}
	c := &Console{
		opts: opts,
		acc: &accounts{
			auth:       opts.Auth,
			sessions:   &sessions{redis: opts.Redis, prefix: opts.KeyPrefix, idle: opts.SessionIdle, max: opts.SessionMax, perIdentity: opts.MaxSessionsPerIdentity, now: opts.Now, log: opts.Log},
			cookies:    cookies{secureAlways: opts.SecureCookies},
			throttle:   newThrottle(opts.Now),
			sessionMax: opts.SessionMax,
			localKey:   []byte(randomToken()),
			log:        opts.Log,
			renderer:   out,
		},
		rpc:      newClients(opts.API),
		events:   newHub(maxListeners, opts.MaxStreamsPerIdentity),
		mux:      http.NewServeMux(),
		renderer: out,
	}
	c.routes()
	return c, nil
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Pages load only what the console itself serves; nothing may frame
	// them (clickjacking an Approve button).
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// Changed tells open pages that something they may show has changed
// (a proposal decided in Slack or git, a cluster re-formed): each reloads
// its content. topic names what changed: "rules", "clusters", "feedback".
func (c *Console) Changed(topic string) { c.events.publish(topic) }

// routes registers every page. Each handler states the role it needs;
// state changes are POSTs and check the session's CSRF token.
func (c *Console) routes() {
	reader, approver, admin := precept.RoleReader, precept.RoleApprover, precept.RoleAdmin
	c.mux.HandleFunc("GET /ui/static/{file}", c.static)
	acc := c.acc
	c.mux.HandleFunc("GET /ui/signin", acc.signinPage)
	c.mux.HandleFunc("POST /ui/signin", acc.signin)
	c.mux.Handle("POST /ui/signout", c.action(reader, acc.signout))
	c.mux.Handle("GET /ui/events", c.page(reader, c.eventStream))
	c.mux.Handle("GET /ui/{$}", c.page(reader, c.home))
	c.mux.Handle("GET /ui/sessions", c.page(admin, acc.sessionsPage))
	c.mux.Handle("POST /ui/sessions/revoke", c.action(admin, acc.revokeSession))

	c.mux.Handle("GET /ui/queue", c.page(reader, c.queuePage))
	c.mux.Handle("GET /ui/proposals/{id}", c.page(reader, c.proposalPage))
	c.mux.Handle("POST /ui/proposals/{id}/approve", c.action(approver, c.approve))
	c.mux.Handle("POST /ui/proposals/{id}/reject", c.action(approver, c.reject))
	c.mux.Handle("GET /ui/decisions/{id}", c.page(reader, c.decisionPage))

	c.mux.Handle("GET /ui/rules", c.page(reader, c.rulesPage))
	c.mux.Handle("GET /ui/rules/{id}", c.page(reader, c.rulePage))
	c.mux.Handle("GET /ui/rules/{id}/effect", c.page(reader, c.ruleEffectChart))
	c.mux.Handle("GET /ui/rules/{id}/rollback", c.page(approver, c.rollbackPage))
	c.mux.Handle("POST /ui/rules/{id}/rollback", c.action(approver, c.rollback))

	c.mux.Handle("GET /ui/clusters", c.page(reader, c.clustersPage))
	c.mux.Handle("GET /ui/clusters/{id}", c.page(reader, c.clusterPage))
	c.mux.Handle("POST /ui/clusters/correct", c.action(approver, c.correctClusters))

	c.mux.Handle("GET /ui/prompts", c.page(reader, c.promptsPage))

	c.mux.Handle("GET /ui/analytics", c.page(reader, c.analyticsPage))
	c.mux.Handle("GET /ui/analytics/{chart}", c.page(reader, c.analyticsExport))

	c.mux.Handle("GET /ui/review", c.page(reader, c.needsReviewPage))
	dlq := deadLetterPages{feedback: c.rpc.feedback, log: c.opts.Log, renderer: c.renderer}
	c.mux.Handle("GET /ui/deadletters", c.page(reader, dlq.list))
	c.mux.Handle("GET /ui/deadletters/confirm", c.page(admin, dlq.confirm))
	c.mux.Handle("POST /ui/deadletters/{action}", c.action(admin, dlq.act))

	c.mux.Handle("/ui/", c.page(reader, func(w http.ResponseWriter, r *http.Request, q *request) error {
		return notFound("no console page at %q", clip(r.URL.Path))
	}))
}

// home sends a visitor to the review queue.
func (c *Console) home(w http.ResponseWriter, r *http.Request, q *request) error {
	http.Redirect(w, r, Prefix+"queue", http.StatusSeeOther)
	return nil
}

// request is what a page handler knows about the visitor.
type request struct {
	// ctx carries the visitor's identity to the RPCs.
	ctx context.Context
	id  precept.Identity
	// session is the visitor's session; its CSRF token goes into forms.
	session *session
}
