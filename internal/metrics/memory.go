package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/lib/mapbound"
	"github.com/precept-dev/precept/lib/memlimit"
)

// Memory exports the Go runtime's soft memory limit as lib/memlimit's
// watchdog keeps it (docs/operations.md, "Memory").
type Memory func() memlimit.Status

var (
	memoryLimitDesc = prometheus.NewDesc("precept_memory_limit_bytes",
		"The Go runtime's soft memory limit now, labelled by where it came from (cgroup_v2, cgroup_v1, meminfo, configured, GOMEMLIMIT, fallback); absent when there is none.", []string{"source"}, nil)
	memoryNearDesc = prometheus.NewDesc("precept_memory_heap_near_limit",
		"1 while the live heap has stayed above 90% of the soft limit, where the collector runs back to back.", nil, nil)
	memoryRaisesDesc = prometheus.NewDesc("precept_memory_limit_raises_total",
		"Raises of an automatic soft limit toward its ceiling because the live heap stayed near it.", nil, nil)
)

// NewMemory registers the collector of the soft limit on reg.
func NewMemory(reg prometheus.Registerer, status Memory) error {
	_, err := register(reg, status)
	return err
}

func (Memory) Describe(ch chan<- *prometheus.Desc) {
	ch <- memoryLimitDesc
	ch <- memoryNearDesc
	ch <- memoryRaisesDesc
}

func (m Memory) Collect(ch chan<- prometheus.Metric) {
	st := m()
	if st.Limit > 0 {
		ch <- prometheus.MustNewConstMetric(memoryLimitDesc, prometheus.GaugeValue, float64(st.Limit), string(st.Source))
	}
	near := 0.0
	if st.NearLimit {
		near = 1
	}
	ch <- prometheus.MustNewConstMetric(memoryNearDesc, prometheus.GaugeValue, near)
	ch <- prometheus.MustNewConstMetric(memoryRaisesDesc, prometheus.CounterValue, float64(st.Raises))
}

// MappedMemory exports lib/mapbound's bound on the resident part of
// bbolt's maps (docs/operations.md, "Memory").
type MappedMemory func() mapbound.Status

var (
	mappedResidentDesc = prometheus.NewDesc("precept_memory_file_resident_bytes",
		"The process's file-backed resident memory at the last check (bbolt's maps, the binary's text); the maps are released when it is above precept_memory_file_resident_budget_bytes.", nil, nil)
	mappedBudgetDesc = prometheus.NewDesc("precept_memory_file_resident_budget_bytes",
		"The file-backed resident size above which bbolt's maps are released from the process.", nil, nil)
	mappedReleasesDesc = prometheus.NewDesc("precept_memory_map_releases_total",
		"Times bbolt's maps were released from the process because its file-backed resident memory was above the budget.", nil, nil)
)

// NewMappedMemory registers the collector of the map bound on reg.
func NewMappedMemory(reg prometheus.Registerer, status MappedMemory) error {
	_, err := register(reg, status)
	return err
}

func (MappedMemory) Describe(ch chan<- *prometheus.Desc) {
	ch <- mappedResidentDesc
	ch <- mappedBudgetDesc
	ch <- mappedReleasesDesc
}

func (m MappedMemory) Collect(ch chan<- prometheus.Metric) {
	st := m()
	ch <- prometheus.MustNewConstMetric(mappedResidentDesc, prometheus.GaugeValue, float64(st.FileResident))
	ch <- prometheus.MustNewConstMetric(mappedBudgetDesc, prometheus.GaugeValue, float64(st.Budget))
	ch <- prometheus.MustNewConstMetric(mappedReleasesDesc, prometheus.CounterValue, float64(st.Releases))
}
