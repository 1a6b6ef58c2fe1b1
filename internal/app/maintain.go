package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// maintainRepos keeps the feedback and rules repositories small in files
// (docs/thresholds.md, "Repository maintenance"): every interval each is
// checked, and one with too many packfiles or loose objects has them
// rolled into one pack while commits go on.
func (a *App) maintainRepos(ctx context.Context) error {
	repos := map[string]*gitrepo.Repo{"feedback": a.FeedbackRepo, "rules": a.RulesRepo}
	m, err := metrics.NewGitRepos(a.Registry, repos)
	if err != nil {
		return err
	}
	debris := map[string]uint64{}
	for name, r := range repos {
		st, _ := r.Stats()
		debris[name] = st.DebrisRemoved
	}
	t := time.NewTicker(a.Config.Maintenance.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, name := range []string{"feedback", "rules"} {
			start := time.Now()
			rewrote, err := repos[name].Maintain()
			took := time.Since(start)
			m.ObserveMaintain(name, rewrote, err, took)
			debris[name] = reportDebris(a.Log, name, repos[name], debris[name])
			switch {
			case err != nil:
				a.Log.Warn("repository maintenance failed; will retry", "repo", name, "err", err)
			case rewrote:
				st, _ := repos[name].Stats()
				a.Log.Info("repository maintained", "repo", name, "packs", st.Packs, "loose_objects", st.Loose, "took", took.Round(time.Millisecond))
			}
			if ctx.Err() != nil {
				return nil
			}
		}
	}
}

// reportDebris logs the temporary files of killed writes that a
// repository removed since it had removed before, and returns its count.
func reportDebris(log *slog.Logger, name string, r *gitrepo.Repo, before uint64) uint64 {
	st, err := r.Stats()
	if err != nil || st.DebrisRemoved <= before {
		return before
	}
	log.Warn("removed temporary files left by interrupted writes", "repo", name,
		"files", st.DebrisRemoved-before, "total_bytes_removed", st.DebrisBytesRemoved)
	return st.DebrisRemoved
}
