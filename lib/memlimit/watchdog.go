package memlimit

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

const (
	// Near is the part of the soft limit above which a live heap leaves
	// the collector too little room: with live ≥ 90% of the limit the
	// heap goal is at most 11% above live, so a cycle starts after every
	// few megabytes allocated and the collector runs back to back.
	Near = 0.9
	// Clear is where an episode near the limit ends; the gap from Near
	// keeps a heap hovering at the line from warning again and again.
	Clear = 0.8
	// Sustain is how many samples in a row must be near the limit before
	// the watchdog acts: a burst that one collection clears is not a
	// regime.
	Sustain = 3
	// Interval is how often the watchdog samples the runtime.
	Interval = 5 * time.Second
	// RaiseStep is the part of the ceiling one raise adds to an auto
	// limit: from 70% of the memory to the 90% ceiling in three steps
	// (79%, 88%, 90%), each followed by Sustain samples to see whether it
	// was enough.
	RaiseStep = 0.1
)

// Sample is what the watchdog reads from the runtime.
type Sample struct {
	// Live is the heap that survived the last collection.
	Live uint64
	// Goal is the heap size at which the next collection starts.
	Goal uint64
	// Cycles counts collections since the process started.
	Cycles uint64
}

// ReadRuntime samples the Go runtime through runtime/metrics.
func ReadRuntime() Sample {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Sample{Live: v(0), Goal: v(1), Cycles: v(2)}
}

// Status is what the watchdog exports as metrics.
type Status struct {
	// Limit is the soft limit in bytes now; 0 when there is none.
	Limit int64
	// Source is where the limit came from.
	Source Source
	// NearLimit is true during an episode: the live heap has stayed
	// above Near of the limit.
	NearLimit bool
	// Raises counts the limit's raises since start.
	Raises uint64
}

// Watchdog samples the runtime every Interval, warns once an episode
// when the live heap stays near the soft limit, and in auto mode raises
// the limit toward the choice's ceiling.
type Watchdog struct {
	log *slog.Logger
	// read and setLimit are the runtime's; tests pass their own.
	read     func() Sample
	setLimit func(int64) int64

	mu      sync.Mutex
	choice  Choice
	near    bool
	streak  int
	raises  uint64
	last    Sample
	lastAt  time.Time
	sampled bool
}

// NewWatchdog returns a watchdog over the limit c. read and setLimit
// default to ReadRuntime and debug.SetMemoryLimit when nil.
func NewWatchdog(c Choice, log *slog.Logger, read func() Sample, setLimit func(int64) int64) *Watchdog {
	if read == nil {
		read = ReadRuntime
	}
	if setLimit == nil {
		setLimit = debug.SetMemoryLimit
	}
	return &Watchdog{log: log, read: read, setLimit: setLimit, choice: c}
}

// Status reports the limit and the watchdog's state; safe to call
// while Run runs.
func (w *Watchdog) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Status{Limit: w.choice.Limit, Source: w.choice.Source, NearLimit: w.near, Raises: w.raises}
}

// Run samples until ctx ends. It returns nil at once when there is no
// limit to watch.
func (w *Watchdog) Run(ctx context.Context) error {
	if w.choice.Limit <= 0 {
		return nil
	}
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			w.Check(now)
		}
	}
}

// Check takes one sample at now and acts on it.
func (w *Watchdog) Check(now time.Time) {
	s := w.read()
	w.mu.Lock()
	defer w.mu.Unlock()
	limit := w.choice.Limit
	if limit <= 0 {
		return
	}
	rate := 0.0
	if w.sampled && now.After(w.lastAt) && s.Cycles >= w.last.Cycles {
		rate = float64(s.Cycles-w.last.Cycles) / now.Sub(w.lastAt).Seconds()
	}
	w.last, w.lastAt, w.sampled = s, now, true
	live := float64(s.Live)
	switch {
	case live >= Near*float64(limit):
		w.streak++
	case live < Clear*float64(limit):
		w.streak = 0
		if w.near {
			w.near = false
			w.log.Info("memory: the live heap is back well under the soft limit", "live_mib", s.Live>>20, "limit_mib", limit>>20)
		}
		return
	default:
		// Between Clear and Near: an episode goes on, a new one does not
		// start.
		w.streak = 0
		return
	}
	if w.streak < Sustain {
		return
	}
	if !w.near {
		w.near = true
		w.log.Warn("memory: the live heap stays near the soft limit; the collector runs back to back",
			"live_mib", s.Live>>20, "goal_mib", s.Goal>>20, "limit_mib", limit>>20, "source", string(w.choice.Source),
			"gc_per_second", rate, "raisable", w.choice.Ceiling > limit)
	}
	if w.choice.Ceiling <= limit {
		return
	}
	next := min(limit+int64(RaiseStep*float64(w.choice.Ceiling)), w.choice.Ceiling)
	w.setLimit(next)
	w.choice.Limit = next
	w.raises++
	w.streak = 0
	w.log.Warn("memory: raised the soft limit so the collector stops running back to back",
		"from_mib", limit>>20, "to_mib", next>>20, "ceiling_mib", w.choice.Ceiling>>20, "live_mib", s.Live>>20)
}
