package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInstructionTargetsAreValidated(t *testing.T) {
	empty, full := filepath.Join(t.TempDir(), "empty"), filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, yaml, want string
	}{
		{"valid", `{agent: a, stage: s, remote_url: "https://x/r.git", formats: [agents, cursor], token_env: T}`, ""},
		{"bad agent", `{agent: "a b", stage: s, remote_url: u}`, "instructions.targets[0].agent"},
		{"no stage", `{agent: a, remote_url: u}`, "instructions.targets[0].stage"},
		{"no remote", `{agent: a, stage: s}`, "instructions.targets[0].remote_url: required"},
		{"unknown format", `{agent: a, stage: s, remote_url: u, formats: [windsurf]}`, "instructions.targets[0].formats"},
		{"two token sources", `{agent: a, stage: s, remote_url: u, token_env: T, token_file: /f}`, "not both"},
		{"password in the URL", `{agent: a, stage: s, remote_url: "https://bot:pw-in-url@x/r.git"}`, "instructions.targets[0].remote_url"},
		{"token over plain http", `{agent: a, stage: s, remote_url: "http://git.example.com/r.git", token_env: T}`, "plain http"},
		{"token over loopback http", `{agent: a, stage: s, remote_url: "http://127.0.0.1:9/r.git", token_env: T}`, ""},
		{"empty token file", `{agent: a, stage: s, remote_url: "https://x/r.git", token_file: "` + empty + `"}`, "instructions.targets[0].token_file"},
		{"missing token file", `{agent: a, stage: s, remote_url: "https://x/r.git", token_file: "` + empty + `.absent"}`, "instructions.targets[0].token_file"},
		{"token file", `{agent: a, stage: s, remote_url: "https://x/r.git", token_file: "` + full + `"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("instructions: {targets: ["+c.yaml+"]}", nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "pw-in-url"):
				t.Fatalf("the error shows the password: %v", err)
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
