package feedbackstore

import "time"

// Metrics receives what a Store measures. internal/metrics implements it
// for Prometheus; the store itself knows no metrics library.
type Metrics interface {
	// ObserveCommit is called after each attempt to commit a batch of
	// decisions, with how long it took.
	ObserveCommit(d time.Duration)
	// ObserveBatch is called with the number of decisions of each batch
	// committed.
	ObserveBatch(decisions int)
	// SetDecisions is called with the number of decisions in the index
	// after it followed the branch.
	SetDecisions(n int)
	// ObserveOrder is called after each round of ordering the node
	// branches into main (Options.NodeBranch), with the decisions the
	// merge this node landed added, and the round's error.
	ObserveOrder(decisions int, err error)
}

type nopMetrics struct{}

func (nopMetrics) ObserveCommit(time.Duration) {}
func (nopMetrics) ObserveBatch(int)            {}
func (nopMetrics) SetDecisions(int)            {}
func (nopMetrics) ObserveOrder(int, error)     {}
