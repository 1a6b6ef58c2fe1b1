package metrics_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/rules"
)

func TestSyncsWithARemoteThatIsDownAreCountedFailed(t *testing.T) {
	// A remote that does not exist: every fetch fails, so no push is
	// ever tried and precept_git_pushes_total does not move.
	down := filepath.Join(t.TempDir(), "gone.git")
	m, reg := newManager(t, rules.Options{Remote: &rules.Remote{URL: down}})
	if err := metrics.RemoteSyncs(reg, m); err != nil {
		t.Fatal(err)
	}
	const name = "precept_rules_remote_syncs_total"
	if got, want := gather(t, reg)[name], `{result="failed"} 0; {result="ok"} 0`; got != want {
		t.Fatalf("before any sync: %s = %s, want %s", name, got, want)
	}
	for i := 0; i < 3; i++ {
		if err := m.Sync(context.Background()); err == nil {
			t.Fatal("a sync with a remote that does not exist succeeded")
		}
	}
	if got, want := gather(t, reg)[name], `{result="failed"} 3; {result="ok"} 0`; got != want {
		t.Fatalf("after three syncs with the remote down: %s = %s, want %s", name, got, want)
	}
}
