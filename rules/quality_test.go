package rules

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// TestQualityGateParsesImperativesAndProblemStatements pins how the gate
// tells an instruction from a problem statement (docs/thresholds.md,
// "Quality gate"): imperatives pass however many of their words are
// verbs that are also nouns ("Name every …", "Log external calls …",
// "Give every outbound call a deadline"), and problem statements are
// refused, including fragments without a subject ("Leaks the token into
// logs") and noun phrases that start with a verb-like noun ("Log lines
// include the token").
func TestQualityGateParsesImperativesAndProblemStatements(t *testing.T) {
	instructions := []string{
		// Verbs that are also nouns, followed by a determiner or a
		// quantifier: the object of an imperative.
		"Give every network or external call a timeout or deadline (client timeout or context).",
		"Give every outbound request a timeout.",
		"Give every outbound call a deadline.",
		"Name every exported Go function for what it returns, not how it works.",
		// A subordinate clause after "before"/"after" has its own verb.
		"Ask for a rollback plan in every database migration before it is merged.",
		"Run the migration in a transaction after the backup has finished.",
		"Name the receiver with one or two letters of its type.",
		"Document each public type and what its fields mean.",
		"Document every exported function with one sentence that starts with its name.",
		"Test each branch of the retry loop, including the give-up path.",
		"Log the request id with every error so failures can be traced.",
		"Call Close on every response body, also when the status is not 200.",
		"Check the error returned by every Close call on a writer.",
		"Check every type assertion with the two-value form.",
		"Limit each handler to one responsibility.",
		"Handle the error of every deferred Close that writes a file.",
		"Lock the mutex before reading the shared map and unlock it with defer.",
		"Record the duration of every external call as a histogram.",
		"Pin the base image by digest in every Dockerfile.",
		"Store each request's trace id in its context.",
		"Return a typed error when the record does not exist.",
		"Release the lock before any call that can block.",
		"Cache the parsed template instead of parsing it on every request.",
		"Use the caller's context for every outbound HTTP call.",
		// Nouns that look like finite verbs inside the object.
		"Wrap each external call in a context with a timeout.",
		"Put every database call behind a retry with a cap.",
		"Log external calls with their duration and outcome.",
		"Test network calls against a local fake server.",
		"Retry idempotent calls only, with jittered backoff.",
		"Record calls to the fake so tests can assert on them.",
		"Check errors returned by Close on files opened for writing.",
		"Handle errors returned from deferred calls.",
		"Cache results per call site, never across tenants.",
		"Use context.WithTimeout for every outbound HTTP call.",
		"Propagate the caller's context through every function that does I/O.",
		// Verbs that are also nouns, followed by a bare noun.
		"Limit retries to three attempts with exponential backoff.",
		"Return errors to the caller instead of logging them.",
		"Cache compiled regular expressions in package variables.",
		"Store timestamps in UTC and convert them only for display.",
		"Pin tool versions in go.mod or the Makefile.",
		"Test error paths with a fake that fails on demand.",
		"Name channels after what they carry, not who reads them.",
		"Lock shared maps with a mutex or use sync.Map.",
		"Record metrics for each retry attempt and each final failure.",
		"Document why a lock is needed where it is taken.",
		"Check that every goroutine can exit when the context is cancelled.",
		"Test what the function returns, not how it computes it.",
		"Log errors once, where they are handled.",
		"Call t.Helper in every test helper.",
		"Handle context cancellation in every loop that talks to the network.",
		// Other openings.
		"Split functions longer than 60 lines into named steps.",
		"Sort imports into standard library, third-party and local groups.",
		"Run the race detector on every package that starts goroutines.",
		"Emit one log line per request with its status and duration.",
		"Reject requests larger than the configured body limit.",
		"Propagate cancellation to every goroutine a handler starts.",
		"Give background goroutines a way to stop.",
		"Keep handlers thin: decode, call the domain, encode.",
		"When a call can block, pass it a context with a deadline.",
		"Tests: name them after the behaviour they pin.",
		"Never log request bodies; log their size and a hash instead.",
		"Avoid global HTTP clients without a timeout.",
		"Use `errors.Is` to compare errors, not string matching.",
		"Use table tests: one case per row, named after the behaviour.",
		"Timeouts: use context.WithTimeout for every outbound call.",
		"In hot paths avoid allocations you do not need: preallocate slices and maps.",
		"When you change a flag, a default or a signature, update every doc that describes it.",
		"Let the database do the aggregation instead of a loop in Go.",
		"Could you log the request id with every error?",
	}
	problems := []string{
		// Statements with a subject.
		"The HTTP client has no timeout and requests can hang forever.",
		"Log lines include the token.",
		"Log lines include the full request body with personal data.",
		"Tests are flaky.",
		"errors from the loop are swallowed.",
		"This function is too long.",
		"Test names are meaningless and say nothing about the behaviour.",
		"Errors from the retry loop are returned without any context.",
		"Cache keys leak the user id into metric labels.",
		"Release notes miss the breaking change to the config format.",
		"Lock ordering is inconsistent between the two handlers.",
		"Call sites ignore the error returned by Save.",
		"Retry logic swallows the original error.",
		"Client has no timeout on outbound requests.",
		"Goroutines leak when the context is cancelled.",
		"Name collisions between packages cause the wrong import.",
		"Handler returns a 500 when the record is missing.",
		"Mock returns the same value for every call.",
		"Config values are read from the environment in three places.",
		"Database calls have no deadline.",
		"External calls hang when the upstream is slow.",
		"Cache keys do not include the tenant.",
		"Cache never expires, so memory grows without bound.",
		"There is no retry on the flaky upload path.",
		"It logs the token at debug level.",
		"We never check the error from Close.",
		"Nobody checks the error from Close.",
		"Logging the bearer token leaks it to every reader of the logs.",
		// Fragments without a subject.
		"Leaks the token into logs.",
		"Returns nil instead of an error.",
		"Calls the payment API without a deadline.",
		"Ignores the error from Close.",
		"Swallows context cancellation in the worker loop.",
		"Logs the full request body at info level.",
		"Uses a global HTTP client with no timeout.",
		"Panics on a nil map when the config is empty.",
		"Retries forever without backoff.",
		"Doesn't close the response body.",
		"Didn't add tests for the parser.",
		"Has no test for the error path.",
		"Is missing a timeout on the client.",
		"Missing unit tests for the retry path.",
		"Leaked the token into the build logs.",
		// Noun phrases without a verb.
		"No timeout on the client.",
		"No tests for the new parser.",
		"Not enough tests for the retry path.",
		"Too many nested ifs in the handler.",
		"Swallowed errors in the retry loop.",
		"Unused imports in the handler package.",
		"Hardcoded staging URL in the config loader.",
		"Redundant comments everywhere in the handler.",
		"Wrong key used for the lookup of the account.",
		// Subjects a word list cannot see: contractions, quantifiers,
		// code spans, past forms and labels before a colon.
		"It's called from three places without a lock.",
		"Every test uses the same fixture file.",
		"Thread dump shows two goroutines waiting on each other.",
		"`GetUser` returns nil when the id is unknown.",
		"Reviewer approved it without running the tests.",
		"De Morgan went wrong in the permission check.",
		"Cache keys still include the user id.",
		"Boundary bug: the limit check uses > instead of >=.",
		"Incorrect calculation: the percentage is computed the wrong way round.",
		"The test file mixes three styles: table-driven, copy-paste and loops.",
		"Could this hang when the upstream never answers?",
	}
	// Problem statements with too few English function words for the
	// gate to judge them as English: the parse refuses them, and the gate
	// lets them pass as it lets text in other languages pass.
	unjudged := []string{
		"Index access `parts[1]` panics on malformed input.",
		"TestRetry failed on CI again.",
	}
	if len(instructions) < 40 || len(problems) < 40 {
		t.Fatalf("%d instructions and %d problems; the table needs at least 40 of each", len(instructions), len(problems))
	}
	// prescribesIn is the parse alone, whatever the language check says.
	prescribesIn := func(text string) bool {
		for _, s := range rulefmt.Sentences(text) {
			if prescribes(s) {
				return true
			}
		}
		return false
	}
	for _, s := range instructions {
		if !prescribesIn(s) {
			t.Errorf("%q reads as a problem statement; want an instruction", s)
		}
		if reason := (Quality{}).Check(s); reason != "" {
			t.Errorf("Check(%q) = %q; want it to pass", s, reason)
		}
	}
	for _, s := range problems {
		if prescribesIn(s) {
			t.Errorf("%q reads as an instruction; want a problem statement", s)
		}
		reason := (Quality{}).Check(s)
		switch {
		case reason == "":
			t.Errorf("Check(%q) passes; want it refused as a problem statement", s)
		case utf8.RuneCountInString(s) >= DefaultQuality().MinLength &&
			!strings.Contains(reason, "does not read as an instruction"):
			t.Errorf("Check(%q) = %q; want it refused as a problem statement", s, reason)
		}
	}
	for _, s := range unjudged {
		if prescribesIn(s) || looksEnglish(s) {
			t.Errorf("%q: reads as an instruction %v, looks English %v; want neither (if the gate judges it now, "+
				"move it to the problem statements)", s, prescribesIn(s), looksEnglish(s))
		}
	}
}
