package feedbackstore

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

type recordedMetrics struct {
	mu        sync.Mutex
	commits   int
	batches   []int
	decisions int
}

func (m *recordedMetrics) ObserveCommit(time.Duration) { m.mu.Lock(); m.commits++; m.mu.Unlock() }
func (m *recordedMetrics) ObserveBatch(n int) {
	m.mu.Lock()
	m.batches = append(m.batches, n)
	m.mu.Unlock()
}
func (m *recordedMetrics) SetDecisions(n int)      { m.mu.Lock(); m.decisions = n; m.mu.Unlock() }
func (m *recordedMetrics) ObserveOrder(int, error) {}

func TestTheStoreReportsItsCommitsToItsMetrics(t *testing.T) {
	dir := t.TempDir()
	repo, err := gitrepo.Open(filepath.Join(dir, "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	m := &recordedMetrics{}
	s, err := Open(repo, filepath.Join(dir, "feedback.db"), Options{BatchWait: time.Millisecond, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Store(context.Background(), []precept.Feedback{decision("a", "x", t0), decision("b", "x", t0)}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.commits != 1 || !reflect.DeepEqual(m.batches, []int{2}) || m.decisions != 2 {
		t.Fatalf("metrics: %d commits, batches %v, %d decisions", m.commits, m.batches, m.decisions)
	}
}
