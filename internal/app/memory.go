package app

import (
	"os"
	"runtime/debug"

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
func (a *App) openMemoryLimit() error {
	var env int64
	if os.Getenv("GOMEMLIMIT") != "" {
		// The runtime read it at start; -1 reads without changing it.
		env = debug.SetMemoryLimit(-1)
	}
	setting := a.Config.Server.MemoryLimitMiB.Setting()
	choice, err := memlimit.Choose(setting, env, func() (memlimit.Memory, error) { return memlimit.Detect(memlimit.SystemPaths) }, fallbackMemoryLimitMiB)
	if err != nil {
		a.Log.Warn("memory: cannot read the container's or machine's memory; using a fixed soft limit", "limit_mib", choice.Limit>>20, "err", err)
	}
	if choice.Source != memlimit.Env && choice.Limit > 0 {
		debug.SetMemoryLimit(choice.Limit)
	}
	a.Log.Info("memory: soft limit chosen", "setting", a.Config.Server.MemoryLimitMiB.String(), "source", string(choice.Source),
		"limit_mib", choice.Limit>>20, "ceiling_mib", choice.Ceiling>>20)
	a.memory = memlimit.NewWatchdog(choice, a.Log, nil, nil)
	return metrics.NewMemory(a.Registry, a.memory.Status)
}
