package memlimit

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heap is a runtime the test drives: the live heap it reports and the
// limits the watchdog set on it.
type heap struct {
	sample Sample
	set    []int64
}

func (h *heap) read() Sample { return h.sample }

func (h *heap) setLimit(n int64) int64 {
	h.set = append(h.set, n)
	return 0
}

func watch(c Choice) (*Watchdog, *heap, *bytes.Buffer) {
	var logs bytes.Buffer
	h := &heap{}
	return NewWatchdog(c, slog.New(slog.NewTextHandler(&logs, nil)), h.read, h.setLimit), h, &logs
}

// run takes n samples five seconds apart with the live heap at live
// bytes, the collector running twice a second.
func run(w *Watchdog, h *heap, at *time.Time, n int, live uint64) {
	for range n {
		h.sample.Live = live
		h.sample.Cycles += 10
		*at = at.Add(Interval)
		w.Check(*at)
	}
}

func TestAFixedLimitIsWarnedAboutOnceAndNeverRaised(t *testing.T) {
	const limit = 512 << 20
	w, h, logs := watch(Choice{Limit: limit, Source: Configured})
	at := time.Unix(0, 0)
	run(w, h, &at, Sustain-1, limit*95/100)
	if w.Status().NearLimit {
		t.Fatalf("near the limit after %d samples, want %d in a row first", Sustain-1, Sustain)
	}
	run(w, h, &at, 10, limit*95/100)
	st := w.Status()
	if !st.NearLimit || st.Raises != 0 || st.Limit != limit || len(h.set) != 0 {
		t.Fatalf("status %+v, limits set %v: want near, the operator's limit untouched", st, h.set)
	}
	if n := strings.Count(logs.String(), "stays near the soft limit"); n != 1 {
		t.Fatalf("warned %d times in one episode, want once:\n%s", n, logs)
	}
	for _, want := range []string{"live_mib=486", "limit_mib=512", "gc_per_second=2", "raisable=false", "source=configured"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("warning lacks %s:\n%s", want, logs)
		}
	}
	// Between Clear and Near the episode goes on; under Clear it ends,
	// and a new one warns again.
	run(w, h, &at, 5, limit*85/100)
	if !w.Status().NearLimit {
		t.Fatal("episode ended at 85% of the limit, want it to last until under 80%")
	}
	run(w, h, &at, 1, limit/2)
	if w.Status().NearLimit || !strings.Contains(logs.String(), "back well under") {
		t.Fatalf("episode did not end with the heap at half the limit:\n%s", logs)
	}
	run(w, h, &at, Sustain, limit*95/100)
	if n := strings.Count(logs.String(), "stays near the soft limit"); n != 2 {
		t.Fatalf("warned %d times over two episodes, want twice:\n%s", n, logs)
	}
}

func TestAnAutoLimitIsRaisedStepwiseUpToTheCeiling(t *testing.T) {
	const mem = 2 << 30
	c, err := Choose(Setting{Auto: true}, 0, func() (Memory, error) { return Memory{mem, CgroupV2}, nil }, 512)
	if err != nil {
		t.Fatal(err)
	}
	w, h, logs := watch(c)
	at := time.Unix(0, 0)
	// A live heap that grows with the limit, as a store past what the
	// first limit holds does, until it stops growing at 80% of memory.
	live := func() uint64 { return uint64(w.Status().Limit) * 95 / 100 }
	for range 4 * Sustain {
		run(w, h, &at, 1, min(live(), mem*80/100))
	}
	want := []int64{c.Limit + c.Ceiling/10, c.Limit + 2*(c.Ceiling/10), c.Ceiling}
	if len(h.set) != len(want) {
		t.Fatalf("limits set %v, want %v", h.set, want)
	}
	for i := range want {
		if h.set[i] != want[i] {
			t.Fatalf("limits set %v, want %v", h.set, want)
		}
	}
	st := w.Status()
	if st.Limit != c.Ceiling || st.Raises != 3 || st.Source != CgroupV2 {
		t.Fatalf("status %+v, want the ceiling %d after 3 raises", st, c.Ceiling)
	}
	if n := strings.Count(logs.String(), "raised the soft limit"); n != 3 {
		t.Fatalf("logged %d raises, want 3:\n%s", n, logs)
	}
	// At the ceiling it still watches, and raises no further.
	run(w, h, &at, 3*Sustain, uint64(c.Ceiling)*99/100)
	if len(h.set) != 3 || !w.Status().NearLimit {
		t.Fatalf("limits set %v at the ceiling, near %v: want no more raises, still near", h.set, w.Status().NearLimit)
	}
}

func TestNoLimitNothingToWatch(t *testing.T) {
	w, h, _ := watch(Choice{Source: Off})
	at := time.Unix(0, 0)
	run(w, h, &at, 10, 1<<40)
	if st := w.Status(); st.NearLimit || len(h.set) != 0 {
		t.Fatalf("status %+v with no limit", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTheRuntimeIsReadable(t *testing.T) {
	s := ReadRuntime()
	if s.Goal == 0 {
		t.Fatalf("ReadRuntime = %+v: no heap goal", s)
	}
}

func TestARealHeapNearItsLimitIsSeen(t *testing.T) {
	// 32 MiB kept live, and a limit the runtime is told nothing about
	// (setLimit is never called for a configured limit): the watchdog
	// reads the live heap from runtime/metrics after real collections.
	keep := make([][]byte, 32)
	for i := range keep {
		keep[i] = make([]byte, 1<<20)
		keep[i][0] = 1
	}
	runtime.GC()
	live := ReadRuntime().Live
	if live < 32<<20 {
		t.Fatalf("live heap %d bytes with 32 MiB kept", live)
	}
	var logs bytes.Buffer
	w := NewWatchdog(Choice{Limit: int64(live) * 105 / 100, Source: Configured}, slog.New(slog.NewTextHandler(&logs, nil)), nil, func(int64) int64 {
		t.Fatal("a configured limit was raised")
		return 0
	})
	at := time.Now()
	for range Sustain {
		runtime.GC()
		at = at.Add(Interval)
		w.Check(at)
	}
	runtime.KeepAlive(keep)
	if !w.Status().NearLimit || !strings.Contains(logs.String(), "stays near the soft limit") {
		t.Fatalf("a live heap at 95%% of the limit is not seen as near it: %+v\n%s", w.Status(), logs.String())
	}
}
