package metrics_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lib/testenv"
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
	if got, ok := gather(t, reg)["precept_rules_remote_last_sync_timestamp_seconds"]; ok {
		t.Fatalf("no sync succeeded, yet the last one is at %s", got)
	}
}

// A sync with a remote that is there sets the time of the last
// successful sync: how far this node may lag behind the remote.
func TestTheLastSuccessfulSyncIsExported(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	testenv.Git(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", remote)
	m, reg := newManager(t, rules.Options{Remote: &rules.Remote{URL: remote}})
	if err := metrics.RemoteSyncs(reg, m); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := m.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, ok := gather(t, reg)["precept_rules_remote_last_sync_timestamp_seconds"]
	if !ok {
		t.Fatal("precept_rules_remote_last_sync_timestamp_seconds is not exported after a sync")
	}
	at, err := strconv.ParseFloat(got, 64)
	if err != nil {
		t.Fatal(err)
	}
	if when := time.Unix(0, int64(at*1e9)); when.Before(before.Add(-time.Second)) || when.After(time.Now().Add(time.Second)) {
		t.Fatalf("the last sync is at %s, not between %s and now", when, before)
	}
}
