package config

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept"
)

func TestDefaultsAreValidAndMatchTheDesign(t *testing.T) {
	cfg, err := Load("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.DataDir != "./data" || cfg.Redis.Addr != "" || cfg.Redis.EmbeddedAddr != "127.0.0.1:6380" {
		t.Fatalf("defaults = %+v", cfg)
	}
	if cfg.Redis.Stream != "asdlc:events:hitl_decisions" || cfg.Redis.Group != "precept-evaluator" || cfg.Redis.DeadLetters() != "asdlc:events:hitl_decisions:dlq" {
		t.Fatalf("stream defaults = %+v", cfg.Redis)
	}
	if r := cfg.Redis; r.DeadLetterMaxBytes != 64<<10 || r.DeadLetterMaxLen != 10000 || r.DeadLetterMaxAge != 30*24*time.Hour {
		t.Fatalf("dead-letter bounds = %d bytes, %d entries, %s", r.DeadLetterMaxBytes, r.DeadLetterMaxLen, r.DeadLetterMaxAge)
	}
	if cfg.Node == "" || !cfg.Feedback.Fsync {
		t.Fatalf("node %q fsync %v", cfg.Node, cfg.Feedback.Fsync)
	}
}

func TestFileOverridesDefaultsAndParsesDurations(t *testing.T) {
	cfg, err := Parse(`
listen: 127.0.0.1:9090
redis:
  addr: redis.internal:6379
  block: 250ms
  claim_idle: 2m
ingest:
  gate_agents: {HITL-2: coding-agent}
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9090" || cfg.Redis.Block != 250*time.Millisecond || cfg.Redis.ClaimIdle != 2*time.Minute {
		t.Fatalf("cfg = %+v", cfg)
	}
	if cfg.Redis.BatchSize != 500 {
		t.Fatalf("unset key lost its default: batch_size = %d", cfg.Redis.BatchSize)
	}
	if cfg.Ingest.Limits().GateAgents["HITL-2"] != "coding-agent" {
		t.Fatal("gate_agents not carried into limits")
	}
}

func TestInvalidSettingsNameTheirKey(t *testing.T) {
	tests := []struct {
		yaml string
		key  string
	}{
		{"listen: nonsense", "listen"},
		{"redsi: {}", "redsi"},
		{"redis: {batchsize: 3}", "batchsize"},
		{"redis: {batch_size: 0}", "redis.batch_size"},
		{"redis: {block: -1s}", "redis.block"},
		{"redis: {block: soon}", "block"},
		{"redis: {addr: nohost}", "redis.addr"},
		{"redis: {addr: '127.0.0.1:6379', sentinel: {master_name: m, addrs: ['127.0.0.1:26379']}}", "redis.addr"},
		{"redis: {sentinel: {master_name: m}}", "redis.sentinel.addrs"},
		{"redis: {sentinel: {master_name: m, addrs: [nohost]}}", "redis.sentinel.addrs"},
		{"redis: {sentinel: {addrs: ['127.0.0.1:26379']}}", "redis.sentinel.master_name"},
		{"redis: {dead_letter_stream: asdlc:events:hitl_decisions}", "redis.dead_letter_stream"},
		{"redis: {dead_letter_max_bytes: 100}", "redis.dead_letter_max_bytes"},
		{"redis: {dead_letter_max_len: 0}", "redis.dead_letter_max_len"},
		{"redis: {dead_letter_max_age: 0s}", "redis.dead_letter_max_age"},
		{"log: {level: loud}", "log.level"},
		{"log: {format: xml}", "log.format"},
		{"listen: 0.0.0.0:8080", "auth.tokens"},
		{"auth: {tokens: [{name: ci, role: boss, token: 0123456789abcdef}]}", "auth.tokens[0].role"},
		{"auth: {tokens: [{name: ci, role: reader}]}", "auth.tokens[0]"},
		{"auth: {tokens: [{name: ci, role: reader, token: short}]}", "auth.tokens[0].token"},
		{"auth: {tokens: [{name: ci, role: reader, token_sha256: abc}]}", "auth.tokens[0].token_sha256"},
		{"auth: {tokens: [{role: reader, token: 0123456789abcdef}]}", "auth.tokens[0].name"},
		{"auth: {tokens: [{name: a, role: reader, token: 0123456789abcdef}, {name: a, role: admin, token: fedcba9876543210}]}", "auth.tokens[1].name"},
		{"auth: {tokens: [{name: a, role: reader, token: 0123456789abcdef}, {name: b, role: admin, token: 0123456789abcdef}]}", "auth.tokens[1]"},
		{"node: a/b", "node"},
		{"feedback: {git: {remote_url: \"https://bot:pw-in-url@git.example.com/feedback.git\"}}", "feedback.git.remote_url"},
		{"feedback: {git: {remote_url: \"http://git.example.com/feedback.git\", password: t0ken}}", "feedback.git.remote_url"},
		{"ingest: {max_tags: 0}", "ingest.max_tags"},
		{"evaluator: {similarity_threshold: 1.5}", "evaluator.similarity_threshold"},
		{"evaluator: {index: {backend: milvus}}", "evaluator.index.backend"},
		{"evaluator: {index: {backend: chroma, chroma: {url: 'localhost:8000'}}}", "evaluator.index.chroma.url"},
		{"evaluator: {llm: {provider: openai}}", "evaluator.llm.model"},
		{"evaluator: {embedder: {provider: word2vec}}", "evaluator.embedder.provider"},
		// The local embedder's own range, which it would otherwise clamp.
		{"evaluator: {embedder: {provider: local, dimension: 128}}", "evaluator.embedder.dimension"},
		{"evaluator: {embedder: {provider: local, dimension: 9000}}", "evaluator.embedder.dimension"},
		{"evaluator: {thresholds: {high_min_size: 1}}", "evaluator.thresholds"},
		{"rules: {required_approvals: 0}", "rules.required_approvals"},
		{"rules: {git: {write_through: true}}", "rules.git.write_through: needs rules.git.remote_url"},
		{"rules: {approval_sla: 30s}", "rules.approval_sla"},
		{"rules: {approval_sla: -1h}", "rules.approval_sla"},
		{"rules: {git: {signing_key: too-short}}", "rules.git.signing_key"},
		{"rules: {duplicate_threshold: 0.5}", "rules.duplicate_threshold"},
		{"rules: {quality: {min_signal_density: 2}}", "rules.quality.min_signal_density"},
		{"prompts: {max_rules: 0}", "prompts.max_rules"},
		{"analytics: {max_range_days: 0}", "analytics.max_range_days"},
		{"analytics: {metrics_max_agents: 5000}", "analytics.metrics_max_agents"},
		{"analytics: {enabeld: false}", "enabeld"},
		{"server: {body_timeout: 0s}", "server.body_timeout"},
		{"server: {read_header_timeout: -1s}", "server.read_header_timeout"},
		{"server: {in_flight_wait: 0s}", "server.in_flight_wait"},
		{"server: {max_body_bytes: 1024}", "server.max_body_bytes"},
		{"server: {max_body_bytes: 134217728}", "server.max_in_flight_body_bytes"},
		{"server: {max_body_bytes: 1048576}\ningest: {max_event_bytes: 2097152}", "server.max_body_bytes"},
		{"slack: {bot_token: xoxb-1, channel: C1}", "slack.signing_secret"},
		{"export: {salt: tooshort}", "export.salt"},
		{"ui: {session_idle: 10s}", "ui.session_idle"},
		{"ui: {session_idle: 2h, session_max: 1h}", "ui.session_max"},
		{"ui: {max_sessions_per_identity: 0}", "ui.max_sessions_per_identity"},
		{"ui: {max_sessions_per_identity: 1001}", "ui.max_sessions_per_identity"},
		{"ui: {max_streams_per_identity: 0}", "ui.max_streams_per_identity"},
		{"ui: {max_streams_per_identity: 129}", "ui.max_streams_per_identity"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.yaml, nil)
		if err == nil {
			t.Errorf("%q: accepted", tt.yaml)
			continue
		}
		if !strings.Contains(err.Error(), tt.key) {
			t.Errorf("%q: error %q does not name %s", tt.yaml, err, tt.key)
		}
	}
}

func TestNonLoopbackListenIsAllowedWithTokens(t *testing.T) {
	cfg, err := Parse("listen: 0.0.0.0:8080\nauth: {tokens: [{name: ci, role: recorder, token: 0123456789abcdef}]}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.IsLoopbackListen() {
		t.Fatal("0.0.0.0 reported as loopback")
	}
}

func TestSecretsComeFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "precept.yaml")
	os.WriteFile(path, []byte(`
auth:
  tokens:
    - {name: pipeline, role: recorder, token_env: PIPELINE_TOKEN}
redis: {addr: "r:6379"}
`), 0o600)
	env := map[string]string{"PIPELINE_TOKEN": "s3cret-token-value-123", "PRECEPT_REDIS_PASSWORD": "pw", "PRECEPT_LISTEN": "127.0.0.1:7000",
		"PRECEPT_EXPORT_SALT": "salt-from-the-environment"}
	cfg, err := Load(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth.Tokens[0].Token != "s3cret-token-value-123" || cfg.Redis.Password != "pw" || cfg.Listen != "127.0.0.1:7000" ||
		cfg.Export.Salt != "salt-from-the-environment" {
		t.Fatalf("env not applied: %+v", cfg)
	}
	_, err = Load(path, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "auth.tokens[0].token_env") || !strings.Contains(err.Error(), "PIPELINE_TOKEN") {
		t.Fatalf("missing env var: %v", err)
	}
}

func TestTokenDigestMatchesAHashedToken(t *testing.T) {
	sum := sha256.Sum256([]byte("0123456789abcdef"))
	plain := Token{Token: "0123456789abcdef"}
	hashed := Token{TokenSHA256: strings.ToUpper(hex.EncodeToString(sum[:]))}
	if plain.Digest() != hashed.Digest() {
		t.Fatalf("digests differ: %s vs %s", plain.Digest(), hashed.Digest())
	}
}

func TestCredentialsCarryEachTokensIdentityAndDigest(t *testing.T) {
	sum := sha256.Sum256([]byte("0123456789abcdef"))
	a := Auth{Tokens: []Token{
		{Name: "alice", Role: "approver", Token: "0123456789abcdef"},
		{Name: "ci", Role: "recorder", TokenSHA256: hex.EncodeToString(sum[:])},
	}}
	creds, err := a.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	want := []precept.Credential{
		{Identity: precept.Identity{Name: "alice", Role: precept.RoleApprover}, Digest: hex.EncodeToString(sum[:])},
		{Identity: precept.Identity{Name: "ci", Role: precept.RoleRecorder}, Digest: hex.EncodeToString(sum[:])},
	}
	if !reflect.DeepEqual(creds, want) {
		t.Fatalf("credentials %+v, want %+v", creds, want)
	}
	if _, err := (Auth{Tokens: []Token{{Name: "x", Role: "owner", Token: "0123456789abcdef"}}}).Credentials(); err == nil {
		t.Fatal("a token with an unknown role was turned into a credential")
	}
}

func TestMissingFileIsAnError(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), os.Getenv); err == nil {
		t.Fatal("a missing config file was accepted")
	}
}

func TestDefaultIsCompleteWithoutValidate(t *testing.T) {
	cfg := Default()
	if cfg.Node == "" || cfg.NodeName() != cfg.Node {
		t.Fatalf("node %q, NodeName %q: the default is the host name", cfg.Node, cfg.NodeName())
	}
	if got := cfg.Redis.DeadLetters(); got != "asdlc:events:hitl_decisions:dlq" {
		t.Fatalf("dead-letter stream = %q", got)
	}
	if !cfg.Feedback.Fsync || !cfg.Evaluator.Enabled || !cfg.Features.Proposing || !cfg.Features.Posting || !cfg.Features.AutoMerge || cfg.Features.Clarification {
		t.Fatalf("switches: fsync %v, evaluator %v, features %+v", cfg.Feedback.Fsync, cfg.Evaluator.Enabled, cfg.Features)
	}
	if p := nilPointers(reflect.ValueOf(cfg), "config"); len(p) > 0 {
		t.Fatalf("Default leaves nil pointers that wiring would dereference: %v", p)
	}
	loaded, err := Load("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(loaded, cfg) {
		t.Fatalf("loading no file gives more than Default:\n%+v\nwant\n%+v", loaded, cfg)
	}
}

// nilPointers lists the nil pointers reachable from v.
func nilPointers(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return nilPointers(v.Elem(), path)
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, nilPointers(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	}
	return nil
}

func TestValidateChangesNothing(t *testing.T) {
	for _, text := range []string{
		"",
		"node: ''\nredis: {stream: other, dead_letter_stream: ''}\nevaluator: {llm: {provider: ''}}\nfeatures: {posting: false}",
	} {
		cfg := Default()
		if err := decode(strings.NewReader(text), &cfg); err != nil {
			t.Fatal(err)
		}
		want := cfg
		want.Rules.ProtectedTags = slices.Clone(cfg.Rules.ProtectedTags)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if !reflect.DeepEqual(cfg, want) {
			t.Fatalf("%q: Validate changed the configuration:\n%+v\nwant\n%+v", text, cfg, want)
		}
	}
}

func TestDerivedSettingsFollowWhatTheyDeriveFrom(t *testing.T) {
	cfg, err := Parse("node: ''\nredis: {stream: decisions}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Redis.DeadLetters(); got != "decisions:dlq" {
		t.Fatalf("dead-letter stream = %q, want decisions:dlq", got)
	}
	if h, _ := os.Hostname(); h != "" && cfg.NodeName() != h {
		t.Fatalf("NodeName = %q, want the host name %q", cfg.NodeName(), h)
	}
	cfg, err = Parse("redis: {stream: decisions, dead_letter_stream: bad}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Redis.DeadLetters(); got != "bad" {
		t.Fatalf("dead-letter stream = %q, want the one set", got)
	}
	if _, err := Parse("redis: {stream: decisions, dead_letter_stream: decisions}", nil); err == nil || !strings.Contains(err.Error(), "redis.dead_letter_stream") {
		t.Fatalf("a dead-letter stream equal to the stream: %v", err)
	}
}

func TestFeatureSwitchesKeepTheirDefaultsUnlessSet(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want Features
	}{
		{"", Features{Proposing: true, Posting: true, AutoMerge: true}},
		{"features: {}", Features{Proposing: true, Posting: true, AutoMerge: true}},
		{"features: {posting: ~, clarification: ~}", Features{Proposing: true, Posting: true, AutoMerge: true}},
		{"features: {auto_merge: false, clarification: true}", Features{Proposing: true, Posting: true, Clarification: true}},
	} {
		cfg, err := Parse(tc.yaml, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Features != tc.want {
			t.Errorf("%q: features = %+v, want %+v", tc.yaml, cfg.Features, tc.want)
		}
	}
	for _, tc := range []struct {
		yaml string
		want bool
	}{{"", true}, {"feedback: {fsync: ~}", true}, {"feedback: {fsync: false}", false}} {
		cfg, err := Parse(tc.yaml, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Feedback.Fsync != tc.want {
			t.Errorf("%q: fsync = %v", tc.yaml, cfg.Feedback.Fsync)
		}
	}
	cfg, err := Parse("evaluator: {enabled: false}", nil)
	if err != nil || cfg.Evaluator.Enabled {
		t.Fatalf("evaluator.enabled: false gave %v (%v)", cfg.Evaluator.Enabled, err)
	}
}

func TestAShortExportSaltIsRefusedWithoutBeingQuoted(t *testing.T) {
	_, err := Parse("export: {salt: hunter2-secret}", nil)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("short salt: %v", err)
	}
}
