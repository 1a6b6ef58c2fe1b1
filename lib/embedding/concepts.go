package embedding

// concept is one idea reviewers of agent output keep coming back to, with
// the phrases they use for it. Phrases are matched on lower-cased words as
// written, with plurals folded ("tests" matches "test", "retries" matches
// "retry") but no stemming, so inflections are listed where they matter:
// a stemmer would make "injection" match "inject a fake clock" and
// "missed" match "missing". Stop words count, so "out of date" needs its
// "of". A phrase may belong to several concepts; the longest phrase
// starting at a word wins.
//
// A complaint usually names a topic (tests, docs, logging) and an aspect
// (flaky, outdated, too verbose, or a generic one such as missing). Two
// comments that share both are paraphrases even when they share no word;
// sharing only the topic is the typical near miss ("tests are missing"
// against "tests are flaky"), so topics weigh less than aspects. Words in
// identifiers ("TestDelete", "db.Close()") take part in phrases but do not
// name a concept alone, and single words of five letters or more also
// match with one inner letter too many or too few ("tesst", "loging").
//
// The table is the embedder's built-in domain knowledge: its model. It was
// written for software-review feedback and extended while measuring
// against testdata/feedback; feedback about issues it does not cover falls
// back to word overlap. Changing it changes vectors, so bump localVersion
// with it (TestLocalGoldenVectorPinsLocalVersion insists).
type concept struct {
	name    string
	weight  float64
	phrases []string
}

// Concept weights.
const (
	// aspect is what is wrong or wanted: the most telling part of a
	// complaint.
	aspect = 1.0
	// generic aspects apply to any topic ("missing", "remove"), so they
	// say less on their own.
	generic = 0.5
	// topic is the area a complaint is about.
	topic = 0.5
	// broad concepts appear in complaints about many different things.
	broad = 0.4
)

// concepts is the table, grouped by area. A concept's index is its
// dimension in every vector, so appending or removing one changes them all.
var concepts = []concept{
	// Generic aspects.
	{"missing", generic, []string{"missing", "no", "without", "lack", "lacks", "lacking",
		"absent", "absence", "forgot", "forgotten", "omitted", "omits", "left out",
		"where are", "where is", "untested", "undocumented", "none of", "not a single",
		"there is no", "there are no", "doesn't have", "does not have", "didn't write",
		"did not write", "nothing covers", "nothing in"}},
	{"remove", generic, []string{"remove", "delete", "strip", "get rid of", "clean up",
		"clean those up", "cleanup", "leftover", "left over", "stray"}},
	{"unclear", generic, []string{"unclear", "vague", "meaningless", "cryptic", "confusing",
		"ambiguous", "hard to understand", "hard to follow", "hard to read"}},
	{"missed", generic, []string{"missed", "overlooked", "didn't catch", "did not catch",
		"failed to flag", "failed to catch", "not flagged", "let through"}},

	// Tests.
	{"testing", topic, []string{"test", "testing", "tested", "untested", "unit test",
		"test case", "test coverage", "coverage", "test suite", "spec", "integration test",
		"e2e", "qa", "test plan", "test step"}},
	{"flaky", aspect, []string{"flaky", "flake", "flaked", "flakey", "flakiness",
		"intermittent", "intermittently", "nondeterministic", "non-deterministic",
		"unstable", "randomly", "fails randomly", "sometimes fail", "sometimes fails",
		"timing dependent", "timing-dependent", "unreliable", "deterministic"}},
	{"timing", aspect, []string{"sleep", "time.Sleep", "sleeping", "clock", "wall clock",
		"fake clock", "fixed clock", "timing", "wait group", "WaitGroup", "time.Now",
		"today's date", "current date", "hard-coded date", "time bomb"}},
	{"assertion", aspect, []string{"assert", "assertion", "asserts", "asserting",
		"weak assertion", "expected value", "verify the output", "check the output"}},
	{"mock", aspect, []string{"mock", "mocked", "mocking", "stub", "stubbed", "fake",
		"test double", "in-memory", "real dependencies", "real database"}},
	{"edge-case", aspect, []string{"edge case", "corner case", "boundary", "boundaries",
		"happy path", "happy-path", "unhappy path", "failure mode", "error path",
		"negative case", "malformed", "empty input", "invalid input"}},
	{"isolation", aspect, []string{"isolated", "isolation", "independent", "shared state",
		"global state", "depend on each other", "test order", "leaks state",
		"t.Parallel", "parallel"}},
	{"fixture", aspect, []string{"fixture", "test data", "golden file", "snapshot",
		"testdata"}},
	{"external-call", aspect, []string{"network", "internet", "external service",
		"real api", "live api", "third-party api", "calls out"}},

	// Observability.
	{"logging", topic, []string{"log", "logs", "logging", "logged", "logger", "log line",
		"log message", "log statement", "slog", "zap", "logrus"}},
	{"log-level", aspect, []string{"log level", "warn level", "debug level", "info level",
		"error level", "verbosity", "log spam", "spam the logs", "too noisy"}},
	{"structured-log", aspect, []string{"structured", "structured logging",
		"structured logger", "key-value", "key/value", "key value pairs", "json logs",
		"log format"}},
	{"print", aspect, []string{"print", "printed", "printing", "printf", "println",
		"fmt.Println", "fmt.Printf", "console.log", "stdout", "stderr", "print statement",
		"debug output"}},
	{"debug", broad, []string{"debug", "debugging", "debugger"}},
	{"redact", aspect, []string{"redact", "redacted", "redaction", "mask", "masked",
		"scrub", "plain text", "plaintext", "sensitive", "sensitive data", "pii"}},
	{"monitoring", aspect, []string{"monitoring", "monitor", "metric", "metrics", "alert",
		"alerting", "alerts", "dashboard", "observability", "tracing", "telemetry", "slo",
		"on-call"}},

	// Scope and shape of a change.
	{"scope", aspect, []string{"scope", "out of scope", "unrelated", "scope creep",
		"separate pr", "focused", "drive-by", "beyond the change", "proportional"}},
	{"refactor", topic, []string{"refactor", "refactoring", "refactored", "restructure",
		"reformat", "reformats", "reformatted", "rewrite", "rewrote", "rewriting",
		"redesign"}},
	{"complexity", aspect, []string{"too complex", "complexity", "complicated",
		"overcomplicated", "convoluted", "nested", "nesting", "deeply nested",
		"early return", "return early", "guard clause", "spaghetti", "simplify",
		"simpler", "readability", "long function", "too long", "does too much",
		"single responsibility", "extract"}},
	{"overengineering", aspect, []string{"over-engineered", "overengineered",
		"overengineering", "overkill", "yagni", "premature abstraction",
		"unnecessary abstraction", "too generic", "too abstract"}},
	{"dead-code", aspect, []string{"dead code", "unused", "unreachable",
		"commented-out code", "commented out", "never called", "not used"}},
	{"duplication", aspect, []string{"duplicate", "duplicated", "duplication",
		"copy paste", "copy-paste", "copy-pasted", "reinvent", "existing helper", "reuse",
		"dry"}},
	{"global-state", aspect, []string{"global", "global variable", "globals",
		"package-level variable", "singleton", "mutable state"}},
	{"types", aspect, []string{"type safety", "untyped", "type hint", "type hints",
		"typing", "interface{}", "type assertion", "unsafe cast", "cast", "any type"}},

	// Security.
	{"security", topic, []string{"security", "vulnerability", "vulnerable", "exploit",
		"insecure", "tls", "certificate", "attack", "cve", "xss", "csrf", "ssrf",
		"path traversal", "rce"}},
	{"secret", aspect, []string{"secret", "credential", "api key", "access key",
		"private key", "ssh key", "signing key", "token", "password", "passphrase",
		"auth token", "bearer", "vault", "secret manager", "secrets manager",
		"key rotation", "rotate the key"}},
	{"hardcoded", aspect, []string{"hardcoded", "hard-coded", "hard coded", "hardcode",
		"literal", "checked in", "checked into", "commit credentials", "in source",
		"in the source", "in the repo", "in the repository", "into the repo", "inline"}},
	{"config", broad, []string{"env", "env var", "environment", "environment variable",
		"config", "configuration", "settings", "config file"}},
	{"defaults", aspect, []string{"default value", "sensible default", "fallback",
		"fail fast", "fail at startup", "fail early", "unset"}},
	{"sql", topic, []string{"sql", "query", "queries", "select", "where clause",
		"database query"}},
	{"injection", aspect, []string{"injection", "sql injection", "sqli", "interpolate",
		"interpolated", "interpolation", "string concatenation", "concatenate",
		"concatenated", "concatenation", "parameterized", "parameterised",
		"parameterized query", "placeholder", "prepared statement", "bind parameter",
		"bind variable"}},
	{"auth", aspect, []string{"authentication", "authorization", "auth", "authn",
		"authz", "login", "permission", "access control", "unauthenticated",
		"least privilege"}},
	{"validation", aspect, []string{"validate", "validated", "validation", "sanitize",
		"sanitise", "sanitized", "untrusted", "user input", "input validation",
		"trusts the input"}},

	// Correctness.
	{"null", aspect, []string{"nil", "null", "none", "nullptr", "undefined", "nil pointer",
		"null pointer", "npe", "dereference", "nil check", "null check", "nil guard",
		"invalid memory address", "nonetype", "nullable"}},
	{"crash", broad, []string{"panic", "panics", "crash", "crashed", "crashes",
		"segfault", "segmentation fault"}},
	{"error", topic, []string{"error", "err", "errs", "exception", "except", "catch",
		"try catch", "error handling", "failure"}},
	{"ignore", aspect, []string{"ignore", "ignored", "ignoring", "swallow", "swallowed",
		"swallowing", "silently", "unchecked", "discard", "discarded", "dropped",
		"suppress", "suppressed", "hide", "hides", "empty catch", "empty except"}},
	{"wrap", aspect, []string{"wrap", "wrapped", "wrapping", "%w", "errorf", "fmt.Errorf",
		"annotate", "add context", "with context", "more context", "bare error",
		"errors.Wrap"}},
	{"error-message", aspect, []string{"error message", "error messages",
		"user-facing error", "unhelpful message"}},
	{"propagate", broad, []string{"propagate", "re-raise", "reraise", "raise", "rethrow",
		"bubble up", "caller"}},
	{"status-code", aspect, []string{"status code", "status codes", "http status",
		"200 ok", "4xx", "5xx", "bad request", "internal server error", "response code"}},
	{"timeout", aspect, []string{"timeout", "time out", "timed out", "deadline",
		"time limit", "hang", "hangs", "hung", "hanging", "block forever", "blocks forever",
		"indefinitely", "forever", "context.WithTimeout"}},
	{"http", broad, []string{"http", "http client", "request", "requests", "outbound",
		"outbound call", "upstream", "api call", "webhook", "endpoint"}},
	{"retry", topic, []string{"retry", "retried", "retrying", "backoff",
		"exponential backoff", "attempt", "retry loop", "re-try"}},
	{"concurrency", aspect, []string{"race", "data race", "race condition", "mutex",
		"lock", "goroutine", "thread", "concurrent", "concurrently", "synchronisation",
		"synchronization", "channel", "deadlock"}},
	{"performance", aspect, []string{"slow", "slower", "faster", "speed", "performance",
		"perf", "latency", "quadratic", "inefficient", "n+1", "allocation",
		"takes forever", "too slow", "speed up"}},
	{"memory", aspect, []string{"memory", "memory leak", "evict", "eviction", "cache",
		"unbounded", "without bound", "grow without bound", "oom", "out of memory",
		"into memory", "in memory"}},
	{"batching", aspect, []string{"paginate", "pagination", "page through", "batch",
		"batches", "in chunks", "chunk", "stream", "streaming", "all at once",
		"whole table", "entire table", "load everything", "read everything", "ReadAll"}},
	{"resource", aspect, []string{"close", "closed", "defer", "release", "released",
		"file handle", "connection leak", "connection pool", "pool", "dispose",
		"context manager", "with statement"}},
	{"leak", aspect, []string{"leak", "leaks", "leaking", "leaked", "never stopped",
		"never closed", "never cleans up", "goroutine leak"}},
	{"migration", aspect, []string{"migration", "migrate", "schema change", "backfill",
		"alter table", "drop column", "data loss"}},
	{"rollback", aspect, []string{"rollback", "roll back", "revert", "undo"}},
	{"compat", aspect, []string{"backwards compatible", "backward compatible",
		"backwards compatibility", "backward compatibility", "breaking change",
		"break callers", "callers break", "signature"}},
	{"time-zone", aspect, []string{"timezone", "time zone", "utc", "local time",
		"daylight saving", "dst"}},
	{"precision", aspect, []string{"float", "floating point", "float64", "rounding",
		"decimal", "cents", "precision", "overflow"}},
	{"sorting", aspect, []string{"sort", "sorted", "sorting", "stable sort",
		"sort order"}},

	// Style.
	{"naming", aspect, []string{"name", "naming", "rename", "renamed", "variable name",
		"identifier", "descriptive name", "meaningful name", "named"}},
	{"constant", aspect, []string{"magic number", "magic value", "named constant",
		"const", "constant", "unexplained number"}},
	{"format", aspect, []string{"format", "formatting", "formatted", "whitespace",
		"indentation", "gofmt", "prettier", "lint", "linter", "brace", "style",
		"code style"}},
	{"nitpick", aspect, []string{"nitpick", "nit", "nitpicking", "bikeshedding",
		"bikeshed", "trivial", "pedantic", "noise", "cosmetic", "noisy"}},
	{"comment", topic, []string{"comment", "code comment", "inline comment"}},
	{"dependency", aspect, []string{"dependency", "dependencies", "deps", "third party",
		"third-party", "library", "libraries", "third-party package", "go.mod",
		"package.json", "npm", "pip", "vendor", "stdlib", "standard library"}},
	{"versioning", aspect, []string{"pin", "pinned", "unpinned", "lockfile", "lock file",
		"version range", "semver"}},
	{"commit-message", aspect, []string{"commit message", "conventional commits",
		"conventional-commit", "pr description", "squash", "commit history"}},
	{"license", aspect, []string{"license", "licence", "license header", "copyright",
		"gpl", "attribution"}},
	{"build", aspect, []string{"compile", "compiles", "doesn't compile",
		"does not compile", "compilation", "build fails", "broken build", "syntax error"}},
	{"i18n", aspect, []string{"i18n", "translation", "translate", "translated",
		"localization", "localisation", "locale", "user-facing strings"}},
	{"a11y", aspect, []string{"accessibility", "accessible", "a11y", "aria",
		"screen reader", "alt text", "contrast", "keyboard navigation"}},

	// Documentation.
	{"docs", topic, []string{"docs", "doc", "documentation", "documented", "undocumented",
		"document", "readme", "guide", "tutorial", "reference", "api reference",
		"manual", "wiki", "docstring", "doc comment", "godoc", "jsdoc", "javadoc",
		"pydoc", "page"}},
	{"doc-comment", aspect, []string{"docstring", "doc comment", "godoc", "jsdoc",
		"javadoc", "pydoc", "public symbol", "exported", "public api", "public method",
		"public function", "exported function"}},
	{"outdated", aspect, []string{"outdated", "out of date", "out-of-date", "stale",
		"obsolete", "no longer", "anymore", "deprecated", "still says", "still mentions",
		"still shows", "still describes", "still refers to", "still lists",
		"doesn't match", "does not match", "match the code", "old version", "up to date",
		"old ui"}},
	{"verbose", aspect, []string{"verbose", "wordy", "lengthy", "concise", "trim",
		"cut", "shorten", "shorter", "filler", "repetitive", "repeats", "redundant",
		"too long", "rambling", "tl dr", "tldr", "bullet points"}},
	{"link", aspect, []string{"link", "url", "href", "hyperlink", "anchor", "broken link",
		"dead link", "404"}},
	{"example", aspect, []string{"example", "usage example", "code sample", "sample",
		"snippet", "how to use", "usage"}},
	{"upgrade-guide", aspect, []string{"upgrade guide", "migration guide",
		"upgrade notes", "upgrading", "upgrade path", "how to upgrade",
		"upgrade instructions"}},
	{"install", aspect, []string{"install", "installation", "setup", "set up",
		"getting started", "quickstart", "install command"}},
	{"consistency", aspect, []string{"consistent", "consistently", "inconsistent",
		"inconsistency", "terminology", "glossary", "wording", "same term"}},
	{"visual", aspect, []string{"screenshot", "screenshots", "image", "diagram",
		"picture"}},
	{"markup", aspect, []string{"markdown", "heading", "code block", "syntax highlighting",
		"table of contents"}},
	{"typo", aspect, []string{"typo", "spelling", "misspelled", "misspelt", "grammar"}},
	{"changelog", aspect, []string{"changelog", "release notes", "change log"}},
	{"tone", aspect, []string{"tone", "informal", "formal", "joke", "emoji"}},

	// Planning.
	{"task", broad, []string{"task", "ticket", "story", "stories", "work item",
		"subtask", "plan", "planning"}},
	{"task-size", aspect, []string{"too big", "too large", "huge", "giant", "coarse",
		"granularity", "smaller", "break down", "break it down", "broken down",
		"decompose", "split", "large"}},
	{"acceptance", aspect, []string{"acceptance criteria", "acceptance criterion", "ac",
		"definition of done", "dod", "done criteria", "testable", "verifiable",
		"success criteria"}},
	{"estimate", aspect, []string{"estimate", "estimated", "estimation", "story points",
		"effort", "optimistic", "unrealistic", "underestimated", "underestimate",
		"timeline"}},
	{"order", aspect, []string{"order", "ordering", "sequence", "sequencing",
		"depends on", "depend on", "dependent on", "prerequisite", "blocked by",
		"blocker", "task dependencies"}},
	{"risk", aspect, []string{"risk", "mitigation"}},
	{"ownership", aspect, []string{"owner", "owns", "ownership", "assignee", "assigned",
		"responsible", "who owns"}},
	{"capacity", aspect, []string{"capacity", "bandwidth", "availability", "on leave",
		"team size", "in parallel", "overloaded"}},
	{"rollout", aspect, []string{"rollout", "roll out", "feature flag", "canary",
		"staged rollout", "launch", "release plan"}},

	// Reviews of reviews.
	{"review", broad, []string{"review", "reviewer", "reviewing", "code review",
		"automated review", "review comment", "review feedback"}},
	{"vague", aspect, []string{"vague", "actionable", "not actionable", "specific",
		"concrete", "useless", "hand-wavy", "handwavy", "generic"}},
	{"false-positive", aspect, []string{"false positive", "false positives",
		"not a bug", "incorrect finding", "hallucinated", "made up", "doesn't exist",
		"does not exist", "nonexistent"}},
	{"location", aspect, []string{"line number", "line numbers", "wrong line",
		"wrong file", "line reference", "line references"}},
	{"severity", aspect, []string{"severity", "priority", "prioritize", "prioritise",
		"blocking", "critical", "minor", "major"}},
	{"ci", broad, []string{"ci", "pipeline", "github actions", "ci checks", "red build",
		"failing checks"}},
	{"production", aspect, []string{"prod", "production"}},
	{"generated", aspect, []string{"generated", "generated code", "codegen", "protobuf"}},
}
