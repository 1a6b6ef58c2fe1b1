// Command go is the Go client example (docs/clients.md): it builds the
// prompt an agent runs with, explains it, then produces the reviewers'
// decisions on the agent's work to precept's Redis stream, each
// carrying the prompt version, so precept can tell which rules were in
// force.
//
// The Go client is the generated package
// gen/precept/v1/preceptv1connect: one constructor per service
// (NewPromptServiceClient, NewFeedbackServiceClient, ...) taking an HTTP
// client, preceptd's base URL and Connect options; here an interceptor
// sends the bearer token.
//
//	go run ./examples/go    # the API token is read from $PRECEPT_TOKEN
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// stream is where producers add decisions (redis.stream, docs/formats.md).
const stream = "asdlc:events:hitl_decisions"

type options struct {
	addr, token, redis, stream string
	agent, stage, path, prefix string
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", envOr("PRECEPT_ADDR", "http://127.0.0.1:8080"), "preceptd base URL (env PRECEPT_ADDR)")
	flag.StringVar(&o.token, "token", os.Getenv("PRECEPT_TOKEN"), "API bearer token (env PRECEPT_TOKEN)")
	flag.StringVar(&o.redis, "redis", envOr("PRECEPT_REDIS_ADDR", "127.0.0.1:6380"), "Redis host:port (env PRECEPT_REDIS_ADDR)")
	flag.StringVar(&o.stream, "stream", stream, "the decision stream")
	flag.StringVar(&o.agent, "agent", "coding-agent", "the agent")
	flag.StringVar(&o.stage, "stage", "implement", "the stage")
	flag.StringVar(&o.path, "path", "services/billing/api.go", "the artifact's path, which selects the _rules.md files")
	flag.StringVar(&o.prefix, "id-prefix", fmt.Sprintf("example-go-%d", time.Now().UnixMilli()), "the decision ids' prefix")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "precept example: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	var opts []connect.ClientOption
	if o.token != "" {
		opts = append(opts, connect.WithInterceptors(bearer(o.token)))
	}
	prompts := preceptv1connect.NewPromptServiceClient(http.DefaultClient, o.addr, opts...)

	built, err := prompts.BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: o.agent, Stage: o.stage, ScopePath: o.path}))
	if err != nil {
		return fmt.Errorf("build prompt: %w", err)
	}
	printPrompt(o, built.Msg)
	why, err := prompts.ExplainPrompt(ctx, connect.NewRequest(&preceptv1.ExplainPromptRequest{Agent: o.agent, Stage: o.stage, ScopePath: o.path}))
	if err != nil {
		return fmt.Errorf("explain prompt: %w", err)
	}
	printExplanation(why.Msg)

	rdb := redis.NewClient(&redis.Options{Addr: o.redis, MaxRetries: -1})
	defer rdb.Close()
	for _, ev := range decisions(o, built.Msg.Version) {
		entry, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: o.stream, Values: ev}).Result()
		if err != nil {
			return fmt.Errorf("add decision %s to %s: %w", ev["decision_id"], o.stream, err)
		}
		fmt.Printf("decision %s (%s by %s) with prompt %s sent as stream entry %s\n", ev["decision_id"], ev["decision"], ev["reviewer_id"], ev["prompt_version"], entry)
	}
	return nil
}

// bearer sends the API token with every call.
func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}
}

// decisions are what two reviewers decided about the agent's work, in
// the stream's flat encoding: every value a string, lists as JSON.
func decisions(o options, version string) []map[string]any {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	tags, _ := json.Marshal([]string{"money"})
	common := func(id, epic, verdict, reviewer string) map[string]any {
		return map[string]any{
			"decision_id": o.prefix + "-" + id, "gate_id": "HITL-2", "epic_id": epic, "agent": o.agent,
			"decision": verdict, "reviewer_id": reviewer, "timestamp": now,
			"scope_path": o.path, "prompt_version": version,
		}
	}
	rejected := common("1", "EPIC-7", "REJECTED", "reviewer-1")
	rejected["reviewer_comment"] = "The invoice total is a float64; amounts must be integer cents."
	rejected["tags"] = string(tags)
	rejected["review_duration_seconds"] = "240"
	return []map[string]any{rejected, common("2", "EPIC-8", "APPROVED", "reviewer-2")}
}

func printPrompt(o options, p *preceptv1.BuildPromptResponse) {
	rules := strings.Join(p.RuleIds, ", ")
	if rules == "" {
		rules = "(none)"
	}
	fmt.Printf("BuildPrompt agent %s, stage %s, path %s\n", o.agent, o.stage, o.path)
	fmt.Printf("version  %s\ncommit   %s\nrules    %s\n", p.Version, p.Commit, rules)
	fmt.Printf("--- prompt\n%s\n--- end of prompt\n", p.Prompt)
}

func printExplanation(e *preceptv1.ExplainPromptResponse) {
	fmt.Printf("ExplainPrompt\nversion  %s\nbase     %s\nsummary  %s\n", e.Version, e.BasePromptRef, e.Summary)
	for _, f := range e.RulesFiles {
		exists := "absent"
		if f.Exists {
			exists = "exists"
		}
		fmt.Printf("_rules.md %s: %s: %s\n", f.Path, exists, f.Reason)
	}
	for _, r := range e.Rules {
		if r.Included {
			fmt.Printf("rule %s in at position %d: %s\n", r.RuleId, r.Position, r.Reason)
		} else {
			fmt.Printf("rule %s left out: %s\n", r.RuleId, r.Reason)
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
