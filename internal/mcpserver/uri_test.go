package mcpserver

import (
	"testing"

	"github.com/yosida95/uritemplate/v3"
)

func TestRulesURIsReadBackAsTheirAgentStageAndPath(t *testing.T) {
	for _, in := range []RulesInput{
		{Agent: "coding-agent", Stage: "implement"},
		{Agent: "coding-agent", Stage: "implement", Path: "services/billing/api.go"},
		{Agent: "a.b_c", Stage: "re view", Path: "dir with space/x?y&z.go"},
	} {
		uri := RulesURI(in.Agent, in.Stage, in.Path)
		got, err := parseRulesURI(uri)
		if err != nil || got != in {
			t.Errorf("%s read back as %+v, %v; want %+v", uri, got, err, in)
		}
	}
}

func TestOtherURIsAreNotRules(t *testing.T) {
	for _, uri := range []string{
		"precept://rules/coding-agent", "precept://rules/coding-agent/implement/extra", "precept://rules//implement",
		"precept://prompts/coding-agent/implement", "file:///rules/a/b", "precept://rules/%zz/implement", "::",
		// Only the canonical spelling of a rules URI is one: anything else
		// would name the same rules under another key.
		"precept://rules/coding-agent/implement?path=a.go&x=1",
		"precept://rules/coding-agent/implement?x=1",
		"precept://rules/coding-agent/implement?path=a.go&path=b.go",
		"precept://rules/coding-agent/implement?path=",
		"precept://rules/coding-agent/implement?",
		"precept://rules/coding-agent/implement#frag",
		"precept://rules/coding-agent/implement?path=a.go#frag",
		"precept://user@rules/coding-agent/implement",
		"precept://user:pw@rules/coding-agent/implement",
		"precept://rules:80/coding-agent/implement",
		"PRECEPT://rules/coding-agent/implement",
		"precept://rules/coding%2Dagent/implement",
		"precept://rules/coding-agent/implement?path=a+b.go",
		"precept://rules/coding-agent/implement?path=a%2fb.go",
		// Bad escapes and separators in the query are errors, not the root.
		"precept://rules/coding-agent/implement?path=%zz",
		"precept://rules/coding-agent/implement?path=a;b",
		"precept://rules/coding-agent/implement?path=a.go;x=1",
	} {
		if in, err := parseRulesURI(uri); err == nil {
			t.Errorf("%s read as %+v", uri, in)
		}
	}
}

// The Go SDK routes a read to the template whose RFC 6570 pattern the URI
// matches (uritemplate's Regexp).
func TestRulesURIsMatchTheTemplate(t *testing.T) {
	re := uritemplate.MustNew(RulesTemplate).Regexp()
	for _, uri := range []string{
		RulesURI("coding-agent", "implement", ""),
		RulesURI("coding-agent", "implement", "services/billing/api.go"),
		RulesURI("a.b_c", "re view", "dir with space/x.go"),
	} {
		if !re.MatchString(uri) {
			t.Errorf("%s does not match %s", uri, RulesTemplate)
		}
	}
}
