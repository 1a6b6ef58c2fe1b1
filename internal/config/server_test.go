package config

import (
	"strings"
	"testing"
)

func TestMemoryLimitIsAutoByDefaultAndOldConfigsStillLoad(t *testing.T) {
	if got := Default().Server.MemoryLimitMiB; got != MemoryLimitAuto {
		t.Fatalf("default memory_limit_mib = %v, want auto (a fixed 512 MiB makes the collector thrash past 100k decisions)", got)
	}
	for _, tc := range []struct {
		yaml string
		want MemoryLimit
	}{
		{"server: {memory_limit_mib: auto}", MemoryLimitAuto},
		{"server: {memory_limit_mib: AUTO}", MemoryLimitAuto},
		{"server: {memory_limit_mib: 0}", 0},
		{"server: {memory_limit_mib: 512}", 512},
		{"server: {memory_limit_mib: 64}", 64},
		{"server:\n  memory_limit_mib: 4096\n", 4096},
	} {
		cfg, err := Parse(tc.yaml, nil)
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
			continue
		}
		if got := cfg.Server.MemoryLimitMiB; got != tc.want {
			t.Errorf("%q: memory_limit_mib = %v, want %v", tc.yaml, got, tc.want)
		}
	}
}

func TestABadMemoryLimitSaysWhatIsAccepted(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"server: {memory_limit_mib: 63}", "63: use auto, 0 (no limit) or at least 64"},
		{"server: {memory_limit_mib: -1}", "-1: use auto, 0 (no limit) or at least 64"},
		{"server: {memory_limit_mib: lots}", `"lots": use auto, 0 (no limit) or a number of MiB, at least 64`},
		{"server: {memory_limit_mib: 1.5}", `"1.5": use auto, 0 (no limit) or a number of MiB`},
		{"server: {memory_limit_mib: 2GiB}", `"2GiB": use auto, 0 (no limit) or a number of MiB`},
		{"server: {memory_limit_mib: [512]}", "use auto, 0 (no limit) or a number of MiB"},
		{"server: {memory_limit_mib: 99999999999999999999}", "use auto, 0 (no limit) or a number of MiB"},
		{"server: {memory_limit_mib: 8796093022208}", "at most 8388608"},
	} {
		_, err := Parse(tc.yaml, nil)
		if err == nil {
			t.Errorf("%q: accepted", tc.yaml)
			continue
		}
		if !strings.Contains(err.Error(), "server.memory_limit_mib") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q, want it to name server.memory_limit_mib and say %q", tc.yaml, err, tc.want)
		}
	}
}
