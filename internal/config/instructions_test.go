package config

import (
	"strings"
	"testing"
)

func TestInstructionTargetsAreValidated(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"valid", `{agent: a, stage: s, remote_url: "https://x/r.git", formats: [agents, cursor], token_env: T}`, ""},
		{"bad agent", `{agent: "a b", stage: s, remote_url: u}`, "instructions.targets[0].agent"},
		{"no stage", `{agent: a, remote_url: u}`, "instructions.targets[0].stage"},
		{"no remote", `{agent: a, stage: s}`, "instructions.targets[0].remote_url: required"},
		{"unknown format", `{agent: a, stage: s, remote_url: u, formats: [windsurf]}`, "instructions.targets[0].formats"},
		{"two token sources", `{agent: a, stage: s, remote_url: u, token_env: T, token_file: /f}`, "not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("instructions: {targets: ["+c.yaml+"]}", nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	_, err := Parse(`instructions: {targets: [{agent: a, stage: s, remote_url: u}, {agent: a, stage: t, remote_url: u}]}`, nil)
	if err == nil || !strings.Contains(err.Error(), "same remote and branch as instructions.targets[0]") {
		t.Fatalf("two targets on one branch: %v", err)
	}
	if len(Default().Instructions.Targets) != 0 {
		t.Fatal("the automatic sync is on by default")
	}
}
