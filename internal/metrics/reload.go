package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/lib/reload"
)

// ReloadFiles exports how the files operators edit while preceptd runs
// (the rubric, the curator taxonomy) reloaded, keyed by their path.
type ReloadFiles map[string]func() reload.Status

var (
	reloadErrorsDesc = prometheus.NewDesc("precept_config_reload_errors_total",
		"Reloads of an edited file (rubric, taxonomy) that failed; the last good version stays in use.", []string{"file"}, nil)
	reloadBrokenDesc = prometheus.NewDesc("precept_config_reload_broken",
		"1 while the file's current content fails to load and its last good version is in use.", []string{"file"}, nil)
)

// NewReloadFiles registers the collector of files on reg.
func NewReloadFiles(reg prometheus.Registerer, files ReloadFiles) error {
	_, err := register(reg, files)
	return err
}

func (ReloadFiles) Describe(ch chan<- *prometheus.Desc) {
	ch <- reloadErrorsDesc
	ch <- reloadBrokenDesc
}

func (f ReloadFiles) Collect(ch chan<- prometheus.Metric) {
	for path, status := range f {
		st := status()
		broken := 0.0
		if st.Err != nil {
			broken = 1
		}
		ch <- prometheus.MustNewConstMetric(reloadErrorsDesc, prometheus.CounterValue, float64(st.Failures), path)
		ch <- prometheus.MustNewConstMetric(reloadBrokenDesc, prometheus.GaugeValue, broken, path)
	}
}
