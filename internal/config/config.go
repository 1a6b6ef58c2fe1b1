// Package config loads preceptd's configuration: one YAML file whose
// defaults are written in Default, environment overrides for secrets, and
// validation that names the offending key.
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/internal/stream"
	"github.com/precept-dev/precept/lib/gitcli"
)

// Config is everything preceptd can be told. Start from Default: it is
// complete and usable as is. Two zero values mean "derived", and a method
// resolves each: NodeName and Redis.DeadLetters.
type Config struct {
	// Listen is the address of the API, metrics and Slack endpoints.
	Listen string `yaml:"listen"`
	// DataDir holds the git repositories and the local indexes.
	DataDir string `yaml:"data_dir"`
	// Node names this replica: its Redis consumer and its local index
	// directory. Default: the host name; set empty, it means the host
	// name too (NodeName).
	Node      string    `yaml:"node"`
	Log       Log       `yaml:"log"`
	Auth      Auth      `yaml:"auth"`
	Server    Server    `yaml:"server"`
	Redis     Redis     `yaml:"redis"`
	Ingest    Ingest    `yaml:"ingest"`
	Feedback  Feedback  `yaml:"feedback"`
	Evaluator Evaluator `yaml:"evaluator"`
	Rules     Rules     `yaml:"rules"`
	Features  Features  `yaml:"features"`
	Prompts   Prompts   `yaml:"prompts"`
	Analytics Analytics `yaml:"analytics"`
	Slack     Slack     `yaml:"slack"`
	// Effects configures the learning loop (docs/effects.md).
	Effects Effects `yaml:"effects"`
	Export  Export  `yaml:"export"`
	UI      UI      `yaml:"ui"`
	// Maintenance keeps the git repositories' object stores small in files.
	Maintenance Maintenance `yaml:"maintenance"`
	// Instructions keeps instruction files of other repositories in step
	// with agents' prompts (docs/instructions.md).
	Instructions Instructions `yaml:"instructions"`
	// Telemetry exports traces over OTLP (docs/telemetry.md); off by
	// default.
	Telemetry Telemetry `yaml:"telemetry"`
}

// Log configures structured logging.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// Auth configures API access.
type Auth struct {
	// Tokens map bearer tokens to identities and roles. With none, the
	// server binds to loopback only and every caller is a local admin.
	Tokens []Token `yaml:"tokens"`
}

// Token is one API credential.
type Token struct {
	// Name is the identity the token authenticates; approvals record it.
	Name string `yaml:"name"`
	// Role is reader, recorder, approver or admin.
	Role string `yaml:"role"`
	// Exactly one of the following gives the secret: the token itself, the
	// name of an environment variable holding it, or its SHA-256 in hex
	// (so the file need not hold the secret).
	Token       string `yaml:"token"`
	TokenEnv    string `yaml:"token_env"`
	TokenSHA256 string `yaml:"token_sha256"`
}

// Redis configures the decision stream.
type Redis struct {
	// Addr of the Redis server. Empty starts an embedded Redis-protocol
	// server on EmbeddedAddr (development only: it keeps nothing on disk).
	Addr         string `yaml:"addr"`
	EmbeddedAddr string `yaml:"embedded_addr"`
	Username     string `yaml:"username"`
	// Password; env PRECEPT_REDIS_PASSWORD overrides it.
	Password string `yaml:"password"`
	DB       int    `yaml:"db"`
	TLS      bool   `yaml:"tls"`
	// Sentinel, with a master name, finds the primary through Redis
	// Sentinel and follows it across failovers; Addr must then be empty
	// (docs/operations.md, "Redis with Sentinel").
	Sentinel RedisSentinel `yaml:"sentinel"`

	Stream string `yaml:"stream"`
	Group  string `yaml:"group"`
	// DeadLetterStream receives invalid entries; empty means Stream with
	// ":dlq" appended, so it follows a changed stream (DeadLetters).
	DeadLetterStream string        `yaml:"dead_letter_stream"`
	StartID          string        `yaml:"start_id"`
	BatchSize        int           `yaml:"batch_size"`
	Block            time.Duration `yaml:"block"`
	ClaimIdle        time.Duration `yaml:"claim_idle"`
	ClaimInterval    time.Duration `yaml:"claim_interval"`
	MaxDeliveries    int           `yaml:"max_deliveries"`
	MaxInFlight      int           `yaml:"max_in_flight"`
	// DeadLetterMaxBytes bounds the original fields one dead letter keeps;
	// a larger entry keeps its beginning, size and SHA-256. The
	// dead-letter stream keeps DeadLetterMaxLen entries for at most
	// DeadLetterMaxAge (docs/formats.md, "Dead-letter entries").
	DeadLetterMaxBytes int           `yaml:"dead_letter_max_bytes"`
	DeadLetterMaxLen   int           `yaml:"dead_letter_max_len"`
	DeadLetterMaxAge   time.Duration `yaml:"dead_letter_max_age"`
}

// RedisSentinel names the primary Sentinel watches and the sentinels to
// ask for it.
type RedisSentinel struct {
	MasterName string   `yaml:"master_name"`
	Addrs      []string `yaml:"addrs"`
	// Password of the sentinels themselves (requirepass in
	// sentinel.conf), not of the data nodes; env
	// PRECEPT_REDIS_SENTINEL_PASSWORD overrides it.
	Password string `yaml:"password"`
}

// Enabled reports whether Sentinel finds the primary.
func (s RedisSentinel) Enabled() bool { return s.MasterName != "" }

// Ingest bounds what a decision may carry (docs/formats.md).
type Ingest struct {
	MaxEventBytes   int           `yaml:"max_event_bytes"`
	MaxCommentBytes int           `yaml:"max_comment_bytes"`
	MaxTextBytes    int           `yaml:"max_text_bytes"`
	MaxTags         int           `yaml:"max_tags"`
	MaxFutureSkew   time.Duration `yaml:"max_future_skew"`
	// GateAgents derives a missing agent from gate_id.
	GateAgents map[string]string `yaml:"gate_agents"`
}

// Limits returns the decision limits for the domain validator.
func (i Ingest) Limits() precept.Limits {
	return precept.Limits{
		MaxEventBytes:   i.MaxEventBytes,
		MaxCommentBytes: i.MaxCommentBytes,
		MaxTextBytes:    i.MaxTextBytes,
		MaxTags:         i.MaxTags,
		MaxFutureSkew:   i.MaxFutureSkew,
		GateAgents:      i.GateAgents,
	}
}

// Feedback configures the git-backed feedback store.
type Feedback struct {
	// BatchSize is the most decisions one commit holds.
	BatchSize int `yaml:"batch_size"`
	// BatchWait is how long a partial batch waits for more decisions
	// before it is committed.
	BatchWait time.Duration `yaml:"batch_wait"`
	// Fsync makes every commit durable against machine crashes, not just
	// process crashes.
	Fsync bool `yaml:"fsync"`
	// FollowInterval is how often the local index checks for commits made
	// by other replicas; with a remote, how often it is fetched.
	FollowInterval time.Duration `yaml:"follow_interval"`
	// Git, when its RemoteURL is set, makes every write to the feedback
	// repository a push the remote must take before it counts
	// (docs/decisions/0009-replicas.md, "Writes through a git server").
	Git FeedbackGit `yaml:"git"`
}

// FeedbackGit is the feedback repository's remote.
type FeedbackGit struct {
	// RemoteURL is a git server's repository (HTTPS, SSH, or a path).
	RemoteURL string `yaml:"remote_url"`
	// Username and Password (or token) for HTTPS; env
	// PRECEPT_FEEDBACK_GIT_PASSWORD overrides Password.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// SSHKey is a private key file for SSH.
	SSHKey string `yaml:"ssh_key"`
	// BranchPerNode stores each node's decisions on a branch of its own,
	// nodes/<node>, ordered into main by any node
	// (docs/decisions/0009-replicas.md, "Per-node branches"). Off by
	// default until the fix of its stall at 60,000 decisions has run in
	// a full make bench; off pushes every batch to main, where nodes
	// refuse each other's pushes.
	BranchPerNode bool `yaml:"branch_per_node"`
}

// DeadLetters returns the dead-letter stream: DeadLetterStream, or the
// stream's name with ":dlq" appended when that is empty.
func (r Redis) DeadLetters() string {
	if r.DeadLetterStream != "" {
		return r.DeadLetterStream
	}
	return r.Stream + stream.DeadLetterSuffix
}

// Default returns the embedded defaults (docs/architecture.md): everything `make
// run` needs on a fresh machine. It is complete: wiring may use it
// without Validate. Each package's own defaults are referred to, not
// written again.
func Default() Config {
	l := precept.DefaultLimits()
	return Config{
		Listen:  "127.0.0.1:8080",
		DataDir: "./data",
		Node:    DefaultNode(),
		Log:     Log{Level: "info", Format: "text"},
		Server:  defaultServer(),
		Redis: Redis{
			EmbeddedAddr:  "127.0.0.1:6380",
			Stream:        stream.DefaultStream,
			Group:         stream.DefaultGroup,
			StartID:       stream.DefaultStartID,
			BatchSize:     stream.DefaultBatchSize,
			Block:         stream.DefaultBlock,
			ClaimIdle:     stream.DefaultClaimIdle,
			ClaimInterval: stream.DefaultClaimInterval,
			MaxDeliveries: stream.DefaultMaxDeliveries,
			MaxInFlight:   stream.DefaultMaxInFlight,

			DeadLetterMaxBytes: stream.DefaultDeadLetterMaxBytes,
			DeadLetterMaxLen:   stream.DefaultDeadLetterMaxLen,
			DeadLetterMaxAge:   stream.DefaultDeadLetterMaxAge,
		},
		Ingest: Ingest{
			MaxEventBytes:   l.MaxEventBytes,
			MaxCommentBytes: l.MaxCommentBytes,
			MaxTextBytes:    l.MaxTextBytes,
			MaxTags:         l.MaxTags,
			MaxFutureSkew:   l.MaxFutureSkew,
		},
		Feedback: Feedback{
			BatchSize:      feedbackstore.DefaultBatchSize,
			BatchWait:      feedbackstore.DefaultBatchWait,
			Fsync:          true,
			FollowInterval: feedbackstore.DefaultFollowInterval,
		},
		Evaluator: defaultEvaluator(),
		Rules:     defaultRules(),
		Features:  defaultFeatures(),
		Prompts:   defaultPrompts(),
		Analytics: defaultAnalytics(),
		Slack:     defaultSlack(),
		Effects:   defaultEffects(),
		UI:        defaultUI(),

		Maintenance: defaultMaintenance(),
		Telemetry:   defaultTelemetry(),
	}
}

// NodeName returns the name of this replica: Node, or the host name when
// Node is empty.
func (c Config) NodeName() string {
	if c.Node != "" {
		return c.Node
	}
	return DefaultNode()
}

// DefaultNode is the default node name: the host name, or "preceptd" when
// it is unknown.
func DefaultNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "preceptd"
	}
	return h
}

// Load reads the configuration at path over the defaults; path "" means
// defaults only. getenv supplies environment overrides (os.Getenv in
// production).
func Load(path string, getenv func(string) string) (Config, error) {
	if path == "" {
		return Parse("", getenv)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return parse(string(b), getenv, "config "+path)
}

// Parse reads a configuration from YAML text over the defaults, applies
// the environment overrides getenv supplies (none when it is nil), and
// validates the result.
func Parse(text string, getenv func(string) string) (Config, error) {
	return parse(text, getenv, "config")
}

// parse is Parse with what a decoding error names as its source.
func parse(text string, getenv func(string) string, source string) (Config, error) {
	cfg := Default()
	if err := decode(strings.NewReader(text), &cfg); err != nil {
		return Config{}, fmt.Errorf("%s: %w", source, err)
	}
	if getenv != nil {
		cfg.applyEnv(getenv)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func decode(r io.Reader, cfg *Config) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err = dec.Decode(cfg)
	var typeErr *yaml.TypeError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return nil
	case errors.As(err, &typeErr):
		// Name the key of each problem, not just its line.
		keys := keysByLine(&root, "", map[int]string{})
		msgs := make([]string, len(typeErr.Errors))
		for i, m := range typeErr.Errors {
			msgs[i] = m
			var line int
			if _, err := fmt.Sscanf(m, "line %d:", &line); err == nil && keys[line] != "" {
				_, rest, _ := strings.Cut(m, ": ")
				msgs[i] = fmt.Sprintf("%s (line %d): %s", keys[line], line, rest)
			}
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
}

// keysByLine maps each line holding a value to its dotted key path.
func keysByLine(n *yaml.Node, prefix string, out map[int]string) map[int]string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			keysByLine(c, prefix, out)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if prefix != "" {
				key = prefix + "." + key
			}
			out[n.Content[i+1].Line] = key
			keysByLine(n.Content[i+1], key, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			key := fmt.Sprintf("%s[%d]", prefix, i)
			out[c.Line] = key
			keysByLine(c, key, out)
		}
	}
	return out
}

// applyEnv applies the environment overrides: secrets, and the few
// settings an operator changes per deployment.
func (c *Config) applyEnv(getenv func(string) string) {
	set := func(dst *string, key string) {
		if v := getenv(key); v != "" {
			*dst = v
		}
	}
	set(&c.Listen, "PRECEPT_LISTEN")
	set(&c.DataDir, "PRECEPT_DATA_DIR")
	set(&c.Node, "PRECEPT_NODE")
	set(&c.Redis.Addr, "PRECEPT_REDIS_ADDR")
	set(&c.Redis.Password, "PRECEPT_REDIS_PASSWORD")
	set(&c.Redis.Sentinel.Password, "PRECEPT_REDIS_SENTINEL_PASSWORD")
	set(&c.Evaluator.Index.Chroma.Token, "PRECEPT_CHROMA_TOKEN")
	set(&c.Evaluator.Embedder.APIKey, "PRECEPT_EMBEDDER_API_KEY")
	set(&c.Evaluator.LLM.APIKey, "PRECEPT_LLM_API_KEY")
	set(&c.Rules.Git.Password, "PRECEPT_GIT_PASSWORD")
	set(&c.Feedback.Git.Password, "PRECEPT_FEEDBACK_GIT_PASSWORD")
	set(&c.Rules.Git.SigningKey, "PRECEPT_RULES_SIGNING_KEY")
	set(&c.Slack.BotToken, "PRECEPT_SLACK_BOT_TOKEN")
	set(&c.Slack.SigningSecret, "PRECEPT_SLACK_SIGNING_SECRET")
	set(&c.Export.Salt, "PRECEPT_EXPORT_SALT")
	set(&c.Telemetry.OTLPEndpoint, "PRECEPT_OTLP_ENDPOINT")
	set(&c.Telemetry.headersEnv, "PRECEPT_OTLP_HEADERS")
	for i := range c.Auth.Tokens {
		if t := &c.Auth.Tokens[i]; t.TokenEnv != "" {
			t.Token = getenv(t.TokenEnv)
		}
	}
}

// Validate checks every setting, naming the key of the first problem. It
// changes nothing.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.validateServer, c.Server.validate, c.Auth.validate, c.validateAuthNeeded, c.validateIngestion, c.validateBodies,
		c.Evaluator.validate, c.Rules.validate, c.Prompts.validate, c.Analytics.validate, c.Slack.validate, c.Effects.validate,
		c.Maintenance.validate, c.Export.validate, c.UI.validate, c.Instructions.validate, c.Telemetry.validate,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// invalid names the key of a setting and what is wrong with it.
func invalid(key, format string, args ...any) error {
	return fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...))
}

// validateServer checks where preceptd listens, keeps its data and logs,
// and its node name.
func (c Config) validateServer() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return invalid("listen", "%q is not host:port", c.Listen)
	}
	if c.DataDir == "" {
		return invalid("data_dir", "required")
	}
	if strings.ContainsAny(c.Node, "/\\ \t\n") {
		return invalid("node", "%q must not contain slashes or spaces", c.Node)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return invalid("log.level", "%q is not debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return invalid("log.format", "%q is not text or json", c.Log.Format)
	}
	return nil
}

// validate checks each token: a unique name, a role, exactly one secret
// of sufficient length, and no secret shared with another token.
func (a Auth) validate() error {
	seenNames := map[string]bool{}
	seenSecrets := map[string]string{}
	for i, t := range a.Tokens {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		if t.Name == "" {
			return invalid(key+".name", "required")
		}
		if seenNames[t.Name] {
			return invalid(key+".name", "%q is listed twice", t.Name)
		}
		seenNames[t.Name] = true
		if _, err := precept.ParseRole(t.Role); err != nil {
			return invalid(key+".role", "%v", err)
		}
		n := 0
		for _, s := range []string{t.Token, t.TokenSHA256} {
			if s != "" {
				n++
			}
		}
		if t.TokenEnv != "" && t.Token == "" {
			return invalid(key+".token_env", "environment variable %s is empty or unset", t.TokenEnv)
		}
		if n != 1 {
			return invalid(key, "set exactly one of token, token_env or token_sha256")
		}
		if t.Token != "" && len(t.Token) < 16 {
			return invalid(key+".token", "shorter than 16 characters")
		}
		if t.TokenSHA256 != "" {
			if b, err := hex.DecodeString(t.TokenSHA256); err != nil || len(b) != sha256.Size {
				return invalid(key+".token_sha256", "must be 64 hex characters")
			}
		}
		digest := t.Digest()
		if other, ok := seenSecrets[digest]; ok {
			return invalid(key, "uses the same token as %s", other)
		}
		seenSecrets[digest] = t.Name
	}
	return nil
}

// validateAuthNeeded refuses to serve beyond loopback without tokens.
func (c Config) validateAuthNeeded() error {
	if len(c.Auth.Tokens) == 0 && !c.IsLoopbackListen() {
		return invalid("auth.tokens", "required when listen (%s) is not a loopback address: without tokens every caller would be an admin", c.Listen)
	}
	return nil
}

// validateIngestion checks the decision stream, the feedback store and
// the limits on decisions.
func (c Config) validateIngestion() error {
	r := c.Redis
	switch {
	case r.Sentinel.Enabled():
		if r.Addr != "" {
			return invalid("redis.addr", "must be empty with redis.sentinel: Sentinel names the primary")
		}
		if len(r.Sentinel.Addrs) == 0 {
			return invalid("redis.sentinel.addrs", "required with redis.sentinel.master_name")
		}
		for _, a := range r.Sentinel.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return invalid("redis.sentinel.addrs", "%q is not host:port", a)
			}
		}
	case len(r.Sentinel.Addrs) > 0:
		return invalid("redis.sentinel.master_name", "required with redis.sentinel.addrs")
	case r.Addr == "":
		if _, _, err := net.SplitHostPort(r.EmbeddedAddr); err != nil {
			return invalid("redis.embedded_addr", "%q is not host:port", r.EmbeddedAddr)
		}
	default:
		if _, _, err := net.SplitHostPort(r.Addr); err != nil {
			return invalid("redis.addr", "%q is not host:port", r.Addr)
		}
	}
	if r.Stream == "" {
		return invalid("redis.stream", "required")
	}
	if r.Group == "" {
		return invalid("redis.group", "required")
	}
	if r.DeadLetters() == r.Stream {
		return invalid("redis.dead_letter_stream", "must differ from redis.stream")
	}
	checks := []struct {
		key      string
		val, min int
		max      int
	}{
		{"redis.batch_size", r.BatchSize, 1, 10000},
		{"redis.max_deliveries", r.MaxDeliveries, 1, 1000},
		{"redis.max_in_flight", r.MaxInFlight, 1, 64},
		{"redis.db", r.DB, 0, 1 << 16},
		{"redis.dead_letter_max_bytes", r.DeadLetterMaxBytes, 1024, 64 << 20},
		{"redis.dead_letter_max_len", r.DeadLetterMaxLen, 1, 100_000_000},
		{"feedback.batch_size", c.Feedback.BatchSize, 1, 100000},
		{"ingest.max_event_bytes", c.Ingest.MaxEventBytes, 1024, 64 << 20},
		{"ingest.max_comment_bytes", c.Ingest.MaxCommentBytes, 1, 64 << 20},
		{"ingest.max_text_bytes", c.Ingest.MaxTextBytes, 1, 64 << 20},
		{"ingest.max_tags", c.Ingest.MaxTags, 1, 1024},
	}
	for _, ch := range checks {
		if ch.val < ch.min || ch.val > ch.max {
			return invalid(ch.key, "%d is outside %d..%d", ch.val, ch.min, ch.max)
		}
	}
	durations := []struct {
		key string
		val time.Duration
	}{
		{"redis.block", r.Block},
		{"redis.claim_idle", r.ClaimIdle},
		{"redis.claim_interval", r.ClaimInterval},
		{"redis.dead_letter_max_age", r.DeadLetterMaxAge},
		{"feedback.batch_wait", c.Feedback.BatchWait},
		{"feedback.follow_interval", c.Feedback.FollowInterval},
		{"ingest.max_future_skew", c.Ingest.MaxFutureSkew},
	}
	for _, d := range durations {
		if d.val <= 0 {
			return invalid(d.key, "must be a positive duration such as 500ms or 2s")
		}
	}
	if g := c.Feedback.Git; g.RemoteURL != "" {
		if err := gitcli.CheckURL(g.RemoteURL, g.Password != ""); err != nil {
			return invalid("feedback.git.remote_url", "%v", err)
		}
	}
	for gate, agent := range c.Ingest.GateAgents {
		if gate == "" || agent == "" {
			return invalid("ingest.gate_agents", "gate and agent must both be non-empty")
		}
	}
	return nil
}

// Digest returns the SHA-256 of the token in hex: how tokens are compared
// and how they may be written in the file.
func (t Token) Digest() string {
	if t.TokenSHA256 != "" {
		return strings.ToLower(t.TokenSHA256)
	}
	return precept.TokenDigest(t.Token)
}

// Credentials returns the tokens as the API's authenticator keeps them:
// each token's identity and digest.
func (a Auth) Credentials() ([]precept.Credential, error) {
	out := make([]precept.Credential, 0, len(a.Tokens))
	for _, t := range a.Tokens {
		role, err := precept.ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("token %s: %w", t.Name, err)
		}
		out = append(out, precept.Credential{Identity: precept.Identity{Name: t.Name, Role: role}, Digest: t.Digest()})
	}
	return out, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackListen reports whether the API listens on loopback only.
func (c Config) IsLoopbackListen() bool {
	host, _, err := net.SplitHostPort(c.Listen)
	return err == nil && isLoopback(host)
}
