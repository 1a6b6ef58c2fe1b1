package app

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lib/memlimit"
)

// fallbackMemoryLimitMiB is the soft limit when auto mode can read
// neither a cgroup nor /proc/meminfo: the fixed default before auto.
const fallbackMemoryLimitMiB = 512

// openMemoryLimit sets the Go runtime's soft memory limit that
// server.memory_limit_mib asks for (lib/memlimit chooses it), says once
// what it chose and from where, and builds the watchdog Run starts
// (docs/operations.md, "Memory"). A soft limit keeps the heap near what
// is live instead of twice it.
func openMemoryLimit(limit config.MemoryLimit, log *slog.Logger, reg prometheus.Registerer) (*memlimit.Watchdog, error) {
	var env int64
	if os.Getenv("GOMEMLIMIT") != "" {
		// The runtime read it at start; -1 reads without changing it.
		env = debug.SetMemoryLimit(-1)
	}
	setting := limit.Setting()
	choice, err := memlimit.Choose(setting, env, func() (memlimit.Memory, error) { return memlimit.Detect(memlimit.SystemPaths) }, fallbackMemoryLimitMiB)
	if err != nil {
		log.Warn("memory: cannot read the container's or machine's memory; using a fixed soft limit", "limit_mib", choice.Limit>>20, "err", err)
	}
	if choice.Source != memlimit.Env && choice.Limit > 0 {
		debug.SetMemoryLimit(choice.Limit)
	}
	log.Info("memory: soft limit chosen", "setting", limit.String(), "source", string(choice.Source),
		"limit_mib", choice.Limit>>20, "ceiling_mib", choice.Ceiling>>20)
	w := memlimit.NewWatchdog(choice, log, nil, nil)
	return w, metrics.NewMemory(reg, w.Status)
}
