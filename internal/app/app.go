// Package app wires preceptd together from its configuration: the
// decision stream, the feedback store, the API server and the background
// loops. cmd/preceptd and the end-to-end tests use the same wiring.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"
	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/precept-dev/precept/analytics"
	"github.com/precept-dev/precept/effect"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/gen/grpc/health/v1/healthv1connect"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/impact"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/internal/console"
	"github.com/precept-dev/precept/internal/llm"
	"github.com/precept-dev/precept/internal/mcpserver"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/internal/slackapp"
	"github.com/precept-dev/precept/internal/stream"
	"github.com/precept-dev/precept/internal/telemetry"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/mapbound"
	"github.com/precept-dev/precept/lib/memlimit"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
)

// maxProbeBytes bounds a request to the health and reflection services,
// which anyone may call: their requests are a service or file name.
const maxProbeBytes = 64 << 10

// shutdownGrace bounds how long in-flight RPCs and batches may take to
// finish after a stop signal.
const shutdownGrace = 15 * time.Second

// App is a running preceptd.
type App struct {
	Config   config.Config
	Log      *slog.Logger
	Registry *prometheus.Registry

	Redis        redis.UniversalClient
	FeedbackRepo *gitrepo.Repo
	Feedback     *feedbackstore.Store
	Consumer     *stream.Consumer
	// RulesRepo is the rules repository (docs/formats.md), shared by the rule
	// manager and prompt assembly.
	RulesRepo *gitrepo.Repo
	Vectors   vectorindex.Index
	// Embedder turns feedback and rule texts into vectors; the evaluator
	// and the rule manager share it.
	Embedder  embedding.Embedder
	Evaluator *evaluator.Service
	// Analytics keeps the figures per agent, gate and day
	// (docs/analytics.md); nil when analytics.enabled is off.
	Analytics *analytics.Aggregate
	// LLM is the configured language model, nil without one.
	LLM *llm.Model
	// Lessons is the lesson taxonomy the evaluator classifies with.
	Lessons *lesson.Source
	// memory keeps the Go runtime's soft limit (memory.go).
	memory *memlimit.Watchdog
	// maps bounds the resident part of bbolt's maps (memory.go).
	maps *mapbound.Bound
	// reloads watches the edited files (rubric, taxonomy); nil when the
	// evaluator does not run here.
	reloads *reloadWatch
	// Impact previews pending proposals (docs/lifecycle.md), nil where
	// the evaluator does not run.
	Impact *impact.Service

	listenersMu        sync.Mutex
	evaluatorListeners []func(evaluator.Change)
	// Prompts assembles stage prompts from RulesRepo (docs/architecture.md).
	Prompts *prompts.Assembler
	// Rules runs rule proposals and meta-approval on RulesRepo (docs/lifecycle.md).
	Rules *rules.Manager
	// Posts records where proposals were posted to Slack, on a branch of
	// RulesRepo; the Slack app writes them and the API shows them.
	Posts *slackapp.Posts
	// Slack is the Slack app (docs/lifecycle.md), nil unless slack is configured.
	Slack *slackapp.Service
	// Versions records the prompt versions served and Effects measures
	// each rule's effect (docs/effects.md); both nil with effects.enabled
	// off.
	Versions *prompts.Versions
	Effects  *effect.Tracker
	// RuleEffects, when set (before Run), replaces the learning loop as
	// the source of exports' rule-effect records.
	RuleEffects api.RuleEffectsFunc
	// Console is the web console at /ui/ (docs/console.md), nil with
	// ui.enabled off.
	Console *console.Console
	// Traces exports spans over OTLP (docs/telemetry.md); nil with
	// telemetry.otlp_endpoint empty.
	Traces *telemetry.Tracer
	// spans records the evaluated and proposal_drafted spans; nil with
	// tracing off.
	spans *spanRecorder
	// MCP is the MCP server at /mcp (docs/mcp.md).
	MCP *mcpserver.Server

	embedded *miniredis.Miniredis
	// failovers watches the primary Sentinel names; nil without
	// redis.sentinel.
	failovers *primaryWatch
	// rulesNotice tells other nodes of this node's rules changes, and
	// this node of theirs; nil without rules.git.write_through.
	rulesNotice *rulesNotice
	listener    net.Listener
	server      *http.Server
	mux         *http.ServeMux
	// interceptors apply to every Connect handler; rpcInterceptors lists
	// them.
	interceptors    connect.Option
	rpcInterceptors []connect.Interceptor
	closers         []func() error
}

// New opens everything the configuration names and binds the listener,
// but starts no loops; Run does. ctx bounds the start-up work (connecting
// to Redis, re-embedding the feedback store into a new index): cancelling
// it makes New return ctx's error. On error, whatever was opened is
// closed.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *App, err error) {
	// a is not the named result: every error return sets that to nil, and
	// a must still be closed.
	a := &App{Config: cfg, Log: log, Registry: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if a.memory, err = openMemoryLimit(cfg.Server.MemoryLimitMiB, a.Log, a.Registry); err != nil {
		return nil, err
	}
	a.maps = &mapbound.Bound{Budget: mapbound.DefaultBudget, Interval: mapbound.DefaultInterval}
	if err := metrics.NewMappedMemory(a.Registry, a.maps.Status); err != nil {
		return nil, err
	}

	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	nodeDir := filepath.Join(dataDir, "nodes", cfg.NodeName())

	if err := a.openTelemetry(); err != nil {
		return nil, err
	}
	if err := a.openRedis(ctx); err != nil {
		return nil, err
	}
	if err := metrics.NewRedisFailovers(a.Registry, func() uint64 {
		if a.failovers == nil {
			return 0
		}
		return a.failovers.Failovers()
	}); err != nil {
		return nil, err
	}

	a.FeedbackRepo, err = gitrepo.Open(filepath.Join(dataDir, "feedback.git"), gitrepo.Options{NoFsync: !cfg.Feedback.Fsync, MaxPacks: cfg.Maintenance.MaxPacks, MaxLoose: cfg.Maintenance.MaxLoose})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.FeedbackRepo.Close)
	reportDebris(log, "feedback", a.FeedbackRepo, 0)
	feedbackMetrics, err := metrics.NewFeedbackStore(a.Registry)
	if err != nil {
		return nil, err
	}
	upstream, err := feedbackUpstream(a.FeedbackRepo, cfg.Feedback.Git)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	a.Feedback, err = feedbackstore.Open(a.FeedbackRepo, filepath.Join(nodeDir, "feedback.db"), feedbackstore.Options{
		BatchSize:      cfg.Feedback.BatchSize,
		BatchWait:      cfg.Feedback.BatchWait,
		FollowInterval: cfg.Feedback.FollowInterval,
		Logger:         log.With("component", "feedbackstore"),
		Metrics:        feedbackMetrics,
		Upstream:       upstream,
		NodeBranch:     nodeBranch(cfg),
	})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.Feedback.Close)
	if n, err := a.Feedback.Count(); err != nil {
		log.Warn("feedback store ready, but its decisions could not be counted", "err", err, "took", time.Since(start).Round(time.Millisecond), "repository", a.FeedbackRepo.Path())
	} else {
		log.Info("feedback store ready", "decisions", n, "took", time.Since(start).Round(time.Millisecond), "repository", a.FeedbackRepo.Path())
	}

	if err := a.openAnalytics(nodeDir); err != nil {
		return nil, err
	}
	if err := a.openEvaluator(ctx, nodeDir); err != nil {
		return nil, err
	}

	signer, err := rulesSigner(cfg.Rules.Git.SigningKey, dataDir)
	if err != nil {
		return nil, err
	}
	a.RulesRepo, err = gitrepo.Open(filepath.Join(dataDir, "rules.git"), gitrepo.Options{MaxPacks: cfg.Maintenance.MaxPacks, MaxLoose: cfg.Maintenance.MaxLoose, Signer: signer})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.RulesRepo.Close)
	reportDebris(log, "rules", a.RulesRepo, 0)

	r := cfg.Redis
	a.Consumer, err = stream.New(a.Redis, a.decisionSink(), stream.Options{
		Stream:           r.Stream,
		Group:            r.Group,
		Consumer:         cfg.NodeName(),
		DeadLetterStream: r.DeadLetters(),
		StartID:          r.StartID,
		BatchSize:        r.BatchSize,
		Block:            r.Block,
		ClaimIdle:        r.ClaimIdle,
		ClaimInterval:    r.ClaimInterval,
		MaxDeliveries:    r.MaxDeliveries,
		MaxInFlight:      r.MaxInFlight,
		Limits:           cfg.Ingest.Limits(),
		Logger:           log.With("component", "stream"),
		Registerer:       a.Registry,

		DeadLetterMaxBytes: r.DeadLetterMaxBytes,
		DeadLetterMaxLen:   r.DeadLetterMaxLen,
		DeadLetterMaxAge:   r.DeadLetterMaxAge,
	})
	if err != nil {
		return nil, err
	}

	if err := a.buildServer(); err != nil {
		return nil, err
	}
	a.openVersions()
	if err := a.openPrompts(); err != nil {
		return nil, err
	}
	if err := a.openRules(ctx); err != nil {
		return nil, err
	}
	if a.spans != nil {
		a.spans.followProposals(a.Rules)
		a.closers = append(a.closers, a.spans.wait)
	}
	if err := a.openEffects(); err != nil {
		return nil, err
	}
	a.serveFeedback()
	a.serveAnalytics()
	a.serveExport()
	if err := a.openSlack(); err != nil {
		return nil, err
	}
	if err := a.serveConsole(); err != nil {
		return nil, err
	}
	if err := a.serveMCP(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *App) openRedis(ctx context.Context) error {
	r := a.Config.Redis
	if r.Sentinel.Enabled() {
		c, err := dialSentinel(ctx, r)
		if err != nil {
			return err
		}
		a.Redis = c
		a.closers = append(a.closers, c.Close)
		a.failovers = newPrimaryWatch(r, a.Log)
		a.Log.Info("Redis primary found through Sentinel", "master_name", r.Sentinel.MasterName, "sentinels", len(r.Sentinel.Addrs))
		return nil
	}
	addr := r.Addr
	if addr == "" {
		a.embedded = miniredis.NewMiniRedis()
		if err := a.embedded.StartAddr(r.EmbeddedAddr); err != nil {
			return fmt.Errorf("start embedded Redis on %s (redis.embedded_addr): %w", r.EmbeddedAddr, err)
		}
		addr = a.embedded.Addr()
		a.closers = append(a.closers, func() error { a.embedded.Close(); return nil })
		a.Log.Info("embedded Redis-protocol server started (development default: it keeps nothing on disk; set redis.addr for production)",
			"addr", addr, "stream", r.Stream)
	}
	opts := &redis.Options{Addr: addr, Username: r.Username, Password: r.Password, DB: r.DB}
	if r.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	a.Redis = redis.NewClient(opts)
	a.closers = append(a.closers, a.Redis.Close)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to Redis at %s (redis.addr): %w", addr, err)
	}
	return nil
}

func (a *App) buildServer() error {
	creds, err := a.Config.Auth.Credentials()
	if err != nil {
		return err
	}
	auth, err := api.NewAuthenticator(creds)
	if err != nil {
		return err
	}
	if auth.Open() {
		a.Log.Warn("no API tokens configured: listening on loopback only, every caller is a local admin, requests must be addressed to a loopback name", "listen", a.Config.Listen)
	}
	a.rpcInterceptors, err = a.withTracing(api.NewMetricsInterceptor(a.Registry).Expect(preceptv1connect.PromptServiceBuildPromptProcedure), &api.AuthInterceptor{Auth: auth})
	if err != nil {
		return err
	}
	a.interceptors = connect.WithInterceptors(a.rpcInterceptors...)
	a.mux = http.NewServeMux()
	probe := append(api.Codecs(), connect.WithReadMaxBytes(maxProbeBytes))

	a.mux.Handle(preceptv1connect.NewPingServiceHandler(api.PingService{}, a.ConnectOptions()...))
	a.mux.Handle(healthv1connect.NewHealthHandler(&api.HealthService{Ready: a.Ready}, probe...))
	reflector := grpcreflect.NewStaticReflector(api.ServiceNames...)
	a.mux.Handle(grpcreflect.NewHandlerV1(reflector, probe...))
	a.mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector, probe...))
	a.mux.Handle("/metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{Registry: a.Registry}))
	a.mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	a.mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Ready(r.Context()); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n" + a.reloads.detail()))
	})

	ln, err := net.Listen("tcp", a.Config.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (listen): %w", a.Config.Listen, err)
	}
	a.listener = ln
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	// gRPC needs HTTP/2; without TLS that is h2c.
	protocols.SetUnencryptedHTTP2(true)
	s := a.Config.Server
	guard := api.NewGuard(auth, api.GuardOptions{
		BodyTimeout:          s.BodyTimeout,
		MaxBodyBytes:         int64(s.MaxBodyBytes),
		MaxInFlightBodyBytes: int64(s.MaxInFlightBodyBytes),
		InFlightWait:         s.InFlightWait,
		Registerer:           a.Registry,
		TokenPaths:           []string{mcpserver.Path},
	})
	a.server = &http.Server{
		Handler:           guard.Wrap(a.mux),
		Protocols:         protocols,
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		// The guard gives each body its own deadline; this one bounds
		// whatever reads past it. Neither bounds a streamed answer, and
		// there is no WriteTimeout for the same reason.
		ReadTimeout: s.ReadHeaderTimeout + s.BodyTimeout,
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn),
	}
	return nil
}

// serveFeedback serves FeedbackService and EvaluatorService; evaluations
// and clusters link to the proposal the rule manager drafted from them.
func (a *App) serveFeedback() {
	evaluations := &api.EvaluatorService{Evaluator: a.Evaluator, Proposals: a.Rules, Corrections: correctionRecorder{record: a.Feedback.RecordCorrection},
		Lessons: a.Lessons, Limits: a.Config.Ingest.Limits(), Log: a.Log}
	a.Handle(preceptv1connect.NewFeedbackServiceHandler(&api.FeedbackService{
		Store:       a.apiStore(),
		DeadLetters: a.Consumer,
		Similarity:  evaluations,
		Evaluations: evaluations,
		Limits:      a.Config.Ingest.Limits(),
		Log:         a.Log,
	}, a.ConnectOptions()...))
	a.Handle(preceptv1connect.NewEvaluatorServiceHandler(evaluations, a.ConnectOptions()...))
}

// Handle adds an HTTP handler to the server's mux (before Run).
func (a *App) Handle(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

// ConnectOptions returns the options every Connect handler is built with:
// metrics, authentication, the body limit, the strict JSON codec and
// gzip at its fastest level.
func (a *App) ConnectOptions() []connect.HandlerOption {
	return append(api.Codecs(), a.interceptors, connect.WithReadMaxBytes(a.Config.Server.MaxBodyBytes), api.FastCompression())
}

// Addr returns the address the API listens on.
func (a *App) Addr() string { return a.listener.Addr().String() }

// URL returns the API's base URL.
func (a *App) URL() string { return "http://" + a.Addr() }

// Ready returns nil when preceptd can ingest and serve: Redis answers and
// the feedback store can commit.
func (a *App) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := a.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if err := a.Feedback.Health(); err != nil {
		return fmt.Errorf("feedback store: %w", err)
	}
	return nil
}

// Run serves the API and runs the background loops until ctx is done,
// then shuts down gracefully: RPCs and batches in flight finish.
func (a *App) Run(ctx context.Context) error {
	a.Log.Info("preceptd listening", "addr", a.Addr(), "node", a.Config.NodeName(), "data_dir", a.Config.DataDir)
	stopAnalytics := a.runAnalytics(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := a.server.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		return a.server.Shutdown(sctx)
	})
	g.Go(func() error { return a.Consumer.Run(gctx) })
	if a.failovers != nil {
		g.Go(func() error { a.failovers.run(gctx); return nil })
	}
	if a.rulesNotice != nil {
		g.Go(func() error { return a.rulesNotice.run(gctx) })
	}
	g.Go(func() error { return a.Feedback.Run(gctx) })
	if a.Config.Evaluator.Enabled {
		g.Go(func() error { return a.Evaluator.Run(gctx) })
	}
	g.Go(func() error { return a.Prompts.Run(gctx) })
	g.Go(func() error { return a.Rules.Run(gctx) })
	if a.Impact != nil {
		g.Go(func() error { return a.Impact.Run(gctx) })
	}
	g.Go(func() error { return a.runSlack(gctx) })
	g.Go(func() error { return a.maintainRepos(gctx) })
	g.Go(func() error { return a.memory.Run(gctx) })
	g.Go(func() error { return a.maps.Run(gctx) })
	if a.reloads != nil {
		g.Go(func() error { return a.reloads.run(gctx) })
	}
	g.Go(func() error { return a.runEffects(gctx) })
	g.Go(func() error { return a.runInstructions(gctx) })
	err := errors.Join(g.Wait(), stopAnalytics())
	a.Log.Info("preceptd stopped")
	return err
}

// runAnalytics follows the feed for analytics until the returned stop is
// called: after everything else stopped, so its last step takes what the
// evaluator reported up to its own last commit (a batch, a reply, an RPC
// in flight), which is reported once only (docs/analytics.md, "Unclear
// feedback").
func (a *App) runAnalytics(ctx context.Context) (stop func() error) {
	if a.Analytics == nil {
		return func() error { return nil }
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- a.Analytics.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// llmProvider is the model a provider setting names, for internal/llm.
func llmProvider(p config.Provider) llm.Provider {
	return llm.Provider{
		Provider: p.Provider, Model: p.Model, BaseURL: p.BaseURL, APIKey: p.APIKey,
		Timeout: p.Timeout, Temperature: p.Temperature,
	}
}

// Close releases everything New opened, in reverse order.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	a.closers = nil
	if a.listener != nil {
		a.listener.Close()
	}
	return errors.Join(errs...)
}
