package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// GitRepos publishes the shape of precept's git object stores and their
// maintenance (docs/thresholds.md, "Repository maintenance").
type GitRepos struct {
	runs    *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// NewGitRepos registers the collectors on reg (when not nil); repos names
// each repository ("feedback", "rules"). Pack and loose-object counts are
// read at scrape time.
func NewGitRepos(reg prometheus.Registerer, repos map[string]*gitrepo.Repo) (*GitRepos, error) {
	m := &GitRepos{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_git_maintenance_total",
			Help: "Repository maintenance rounds by outcome: rewrote (small packs and loose objects rolled into one pack), idle (nothing to do) or failed.",
		}, []string{"repo", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "precept_git_maintenance_seconds",
			Help:    "Time of maintenance rounds that rewrote objects.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"repo"}),
	}
	var err error
	if m.runs, err = register(reg, m.runs); err != nil {
		return nil, fmt.Errorf("register git metrics: %w", err)
	}
	if m.seconds, err = register(reg, m.seconds); err != nil {
		return nil, fmt.Errorf("register git metrics: %w", err)
	}
	if reg != nil {
		if err := reg.Register(objectStats(repos)); err != nil {
			return nil, fmt.Errorf("register git metrics: %w", err)
		}
	}
	return m, nil
}

// ObserveMaintain records one maintenance round.
func (m *GitRepos) ObserveMaintain(repo string, rewrote bool, err error, took time.Duration) {
	switch {
	case err != nil:
		m.runs.WithLabelValues(repo, "failed").Inc()
	case rewrote:
		m.runs.WithLabelValues(repo, "rewrote").Inc()
		m.seconds.WithLabelValues(repo).Observe(took.Seconds())
	default:
		m.runs.WithLabelValues(repo, "idle").Inc()
	}
}

type objectStats map[string]*gitrepo.Repo

var (
	packsDesc  = prometheus.NewDesc("precept_git_packfiles", "Packfiles in the repository's object store.", []string{"repo"}, nil)
	looseDesc  = prometheus.NewDesc("precept_git_loose_objects", "Loose objects in the repository's object store.", []string{"repo"}, nil)
	debrisDesc = prometheus.NewDesc("precept_git_temp_files_removed_total",
		"Temporary object files left by killed writes (tmp_pack_*, tmp_idx_*, ...) removed at start and by maintenance.", []string{"repo"}, nil)
	debrisBytesDesc = prometheus.NewDesc("precept_git_temp_bytes_removed_total",
		"Bytes of the temporary object files removed at start and by maintenance.", []string{"repo"}, nil)
	commitsDesc = prometheus.NewDesc("precept_git_commits_total",
		"Commits to the repository by result: ok, raced (lost a compare-and-swap, retried) or failed.", []string{"repo", "result"}, nil)
	pushesDesc = prometheus.NewDesc("precept_git_pushes_total",
		"Pushes to the repository's remote by result: ok, rejected (non-fast-forward, fetched and retried) or failed.", []string{"repo", "result"}, nil)
	pushSecondsDesc = prometheus.NewDesc("precept_git_push_seconds",
		"How long pushes to the repository's remote took, whatever their result.", []string{"repo"}, nil)
)

func (objectStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- packsDesc
	ch <- looseDesc
	ch <- debrisDesc
	ch <- debrisBytesDesc
	ch <- commitsDesc
	ch <- pushesDesc
	ch <- pushSecondsDesc
}

func (o objectStats) Collect(ch chan<- prometheus.Metric) {
	for name, r := range o {
		st, err := r.Stats()
		// Commits and pushes are counted in memory: reported even when
		// the object store cannot be read, when they matter most.
		w := st.Writes
		for result, n := range map[string]uint64{"ok": w.Commits, "raced": w.CommitsRaced, "failed": w.CommitsFailed} {
			ch <- prometheus.MustNewConstMetric(commitsDesc, prometheus.CounterValue, float64(n), name, result)
		}
		for result, n := range map[string]uint64{"ok": w.Pushes, "rejected": w.PushesRejected, "failed": w.PushesFailed} {
			ch <- prometheus.MustNewConstMetric(pushesDesc, prometheus.CounterValue, float64(n), name, result)
		}
		buckets := make(map[float64]uint64, len(gitrepo.PushBuckets))
		for i, b := range gitrepo.PushBuckets {
			buckets[b] = w.PushSeconds.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(pushSecondsDesc, w.PushSeconds.Count, w.PushSeconds.Sum, buckets, name)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(packsDesc, prometheus.GaugeValue, float64(st.Packs), name)
		ch <- prometheus.MustNewConstMetric(looseDesc, prometheus.GaugeValue, float64(st.Loose), name)
		ch <- prometheus.MustNewConstMetric(debrisDesc, prometheus.CounterValue, float64(st.DebrisRemoved), name)
		ch <- prometheus.MustNewConstMetric(debrisBytesDesc, prometheus.CounterValue, float64(st.DebrisBytesRemoved), name)
	}
}
