package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheCLILinksNoServerCode keeps precept a thin Connect client: none
// of the server's storage, stream, metrics or domain packages may be
// linked into it.
func TestTheCLILinksNoServerCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/go-git/", "go.etcd.io/bbolt", "github.com/redis/", "github.com/prometheus/",
		"github.com/slack-go/", "github.com/tmc/langchaingo",
		"github.com/precept-dev/precept/rules", "github.com/precept-dev/precept/evaluator",
		"github.com/precept-dev/precept/feedbackstore", "github.com/precept-dev/precept/lib/gitrepo",
		"github.com/precept-dev/precept/internal/api\n", "github.com/precept-dev/precept/internal/app",
	}
	deps := string(out) + "\n"
	for _, f := range forbidden {
		if strings.Contains(deps, f) {
			t.Errorf("cmd/precept links %s", strings.TrimSpace(f))
		}
	}
}
