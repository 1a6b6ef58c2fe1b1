package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/rules"
)

// RemoteSyncer is what precept_rules_remote_syncs_total reads of a rule
// manager (rules.Manager).
type RemoteSyncer interface {
	RemoteSyncs() rules.SyncStats
}

var _ RemoteSyncer = (*rules.Manager)(nil)

var remoteSyncsDesc = prometheus.NewDesc("precept_rules_remote_syncs_total",
	"Syncs of the rules repository with its remote by result: ok, or failed (the fetch or the push failed, or what was fetched could not be applied). Both are 0 without a remote.",
	[]string{"result"}, nil)

// RemoteSyncs registers precept_rules_remote_syncs_total on reg, read
// from src at scrape time. Unlike precept_git_pushes_total it moves when
// the remote cannot even be fetched, so an unreachable remote or refused
// credentials show (docs/operations.md, "PreceptGitPushesFailing").
func RemoteSyncs(reg prometheus.Registerer, src RemoteSyncer) error {
	_, err := register(reg, remoteSyncs{src})
	return err
}

type remoteSyncs struct{ src RemoteSyncer }

var remoteLastSyncDesc = prometheus.NewDesc("precept_rules_remote_last_sync_timestamp_seconds",
	"When the last successful sync of the rules repository with its remote ended, in Unix seconds; absent before one. time() minus it bounds how far this node may lag behind the remote.",
	nil, nil)

func (remoteSyncs) Describe(ch chan<- *prometheus.Desc) {
	ch <- remoteSyncsDesc
	ch <- remoteLastSyncDesc
}

func (r remoteSyncs) Collect(ch chan<- prometheus.Metric) {
	st := r.src.RemoteSyncs()
	ch <- prometheus.MustNewConstMetric(remoteSyncsDesc, prometheus.CounterValue, float64(st.OK), "ok")
	ch <- prometheus.MustNewConstMetric(remoteSyncsDesc, prometheus.CounterValue, float64(st.Failed), "failed")
	if !st.LastOK.IsZero() {
		ch <- prometheus.MustNewConstMetric(remoteLastSyncDesc, prometheus.GaugeValue, float64(st.LastOK.UnixNano())/1e9)
	}
}
