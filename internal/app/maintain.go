package app

import (
	"context"
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
