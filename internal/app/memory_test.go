package app

import (
	"regexp"
	"runtime/debug"
	"strconv"
	"testing"
)

func TestTheSoftLimitFitsTheMachineAndSaysWhereItCameFrom(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, tc := range []struct {
		yaml, setting, source string
		limit                 int64 // 0: derived from this machine
	}{
		{"", "auto", "(?:cgroup_v2|cgroup_v1|meminfo)", 0},
		{"server: {memory_limit_mib: 256}", "256", "configured", 256 << 20},
	} {
		r := start(t, tc.yaml)
		m := regexp.MustCompile(`msg="memory: soft limit chosen" setting=` + tc.setting + ` source=` + tc.source + ` limit_mib=(\d+)`).FindStringSubmatch(r.logs.String())
		if m == nil {
			t.Fatalf("%q: no line saying which soft limit was chosen:\n%s", tc.yaml, r.logs.String())
		}
		got := debug.SetMemoryLimit(-1)
		if tc.limit != 0 && got != tc.limit || got < 64<<20 || m[1] != strconv.FormatInt(got>>20, 10) {
			t.Fatalf("%q: the runtime's limit is %d bytes, the log says %s MiB", tc.yaml, got, m[1])
		}
		mfs, err := r.app.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, mf := range mfs {
			if mf.GetName() == "precept_memory_limit_bytes" {
				found = mf.GetMetric()[0].GetGauge().GetValue() == float64(got)
			}
		}
		if !found {
			t.Fatalf("%q: precept_memory_limit_bytes is not the runtime's limit %d", tc.yaml, got)
		}
		r.stop()
	}
}
