package metrics_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lib/memlimit"
)

func TestTheMemoryLimitItsEpisodesAndRaisesAreExported(t *testing.T) {
	c, err := memlimit.Choose(memlimit.Setting{Auto: true}, 0, func() (memlimit.Memory, error) {
		return memlimit.Memory{Bytes: 1 << 30, Source: memlimit.CgroupV2}, nil
	}, 512)
	if err != nil {
		t.Fatal(err)
	}
	// A heap that stays at 95% of whatever the limit is.
	var w *memlimit.Watchdog
	read := func() memlimit.Sample { return memlimit.Sample{Live: uint64(w.Status().Limit) * 95 / 100} }
	var set []int64
	w = memlimit.NewWatchdog(c, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), read, func(n int64) int64 { set = append(set, n); return 0 })
	reg := prometheus.NewRegistry()
	if err := metrics.NewMemory(reg, w.Status); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	if want := `{source="cgroup_v2"} 7.51619276e+08`; got["precept_memory_limit_bytes"] != want {
		t.Fatalf("at start precept_memory_limit_bytes = %s, want %s", got["precept_memory_limit_bytes"], want)
	}
	if got["precept_memory_heap_near_limit"] != "0" || got["precept_memory_limit_raises_total"] != "0" {
		t.Fatalf("at start: %v", got)
	}
	at := time.Unix(0, 0)
	for range memlimit.Sustain {
		at = at.Add(memlimit.Interval)
		w.Check(at)
	}
	got = gather(t, reg)
	if want := `{source="cgroup_v2"} 8.4825604e+08`; got["precept_memory_limit_bytes"] != want || len(set) != 1 {
		t.Fatalf("after one raise precept_memory_limit_bytes = %s, want %s (limits set %v)", got["precept_memory_limit_bytes"], want, set)
	}
	if got["precept_memory_heap_near_limit"] != "1" || got["precept_memory_limit_raises_total"] != "1" {
		t.Fatalf("after one raise: %v", got)
	}
}

func TestNoMemoryLimitNoLimitSeries(t *testing.T) {
	w := memlimit.NewWatchdog(memlimit.Choice{Source: memlimit.Off}, slog.Default(), nil, nil)
	reg := prometheus.NewRegistry()
	if err := metrics.NewMemory(reg, w.Status); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	if s, ok := got["precept_memory_limit_bytes"]; ok {
		t.Fatalf("precept_memory_limit_bytes = %s with no limit, want no series", s)
	}
	if got["precept_memory_heap_near_limit"] != "0" {
		t.Fatalf("precept_memory_heap_near_limit = %q with no limit", got["precept_memory_heap_near_limit"])
	}
}
