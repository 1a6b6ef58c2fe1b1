package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept/internal/metrics"
)

// reloadCheckInterval is how often the files operators edit while
// preceptd runs are checked for changes, whether or not anything reads
// them meanwhile.
const reloadCheckInterval = 2 * time.Second

// reloadWatch makes a broken edit of the rubric or the curator taxonomy
// visible (docs/lessons.md): every failed reload is logged with its
// reason, counted in precept_config_reload_errors_total{file}, and named
// by /readyz, which stays ready because the last good version serves.
type reloadWatch struct {
	log   *slog.Logger
	files metrics.ReloadFiles

	mu     sync.Mutex
	broken map[string]string // path → why, while it does not load
}

func newReloadWatch(log *slog.Logger, files metrics.ReloadFiles) *reloadWatch {
	return &reloadWatch{log: log, files: files, broken: map[string]string{}}
}

// run checks the files every reloadCheckInterval until ctx ends.
func (w *reloadWatch) run(ctx context.Context) error {
	seen := map[string]uint64{}
	t := time.NewTicker(reloadCheckInterval)
	defer t.Stop()
	for {
		for path, status := range w.files {
			st := status()
			w.mu.Lock()
			_, wasBroken := w.broken[path]
			if st.Err != nil {
				w.broken[path] = st.Err.Error()
			} else {
				delete(w.broken, path)
			}
			w.mu.Unlock()
			switch {
			case st.Failures > seen[path]:
				w.log.Error("reload failed; the last good version stays in use", "file", path, "what", st.What, "err", st.Err, "failures", st.Failures)
			case wasBroken && st.Err == nil:
				w.log.Info("reloaded after a failure", "file", path, "what", st.What)
			}
			seen[path] = st.Failures
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// detail is what /readyz adds while an edited file is broken: one line
// per file and why, "" when none is.
func (w *reloadWatch) detail() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, path := range slices.Sorted(maps.Keys(w.broken)) {
		fmt.Fprintf(&b, "degraded: %s does not load; its last good version serves: %s\n", path, w.broken[path])
	}
	return b.String()
}
