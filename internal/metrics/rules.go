package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// RuleSource is what the rule metrics read of a rule manager
// (rules.Manager): its committed transitions and its proposal counts.
type RuleSource interface {
	OnChange(fn func(rulefmt.Change))
	ProposalCounts(ctx context.Context) (map[rulefmt.ProposalStatus]int, error)
}

var _ RuleSource = (*rules.Manager)(nil)

// proposalStatuses are the label values of precept_rules_proposals,
// always all present.
var proposalStatuses = []rulefmt.ProposalStatus{rulefmt.Pending, rulefmt.Approved, rulefmt.Rejected, rulefmt.Blocked, rulefmt.Deferred, rulefmt.Merged}

// Rules registers the rule manager's metrics on reg:
//
//	precept_rules_proposals{status}          proposals and held drafts, read at scrape time
//	precept_rules_approvals_total{via}       approvals recorded (api, console, mcp, slack) and merges in git
//	precept_rules_rejections_total{via}      rejections
//	precept_rules_guard_blocks_total{guard}  drafts a guard held or merged into a duplicate
//	precept_rules_rollbacks_total            rules rolled back
//	precept_rules_remote_changes_ignored_total{kind}
//	                                         changes fetched from the remote that precept did not record
//	precept_rules_remote_edits_total         proposal texts edited on the remote (approvals reset)
//
// The counters follow the manager's changes (OnChange).
func Rules(reg prometheus.Registerer, src RuleSource, log *slog.Logger) error {
	approvals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_rules_approvals_total",
		Help: "Approvals recorded on rule proposals, by channel (api, console, mcp, slack, git).",
	}, []string{"via"})
	rejections := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_rules_rejections_total",
		Help: "Rule proposals rejected, by channel (api, console, mcp, slack, git).",
	}, []string{"via"})
	guardBlocks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_rules_guard_blocks_total",
		Help: "Drafts a guard blocked or deferred before they became rule PRs, by guard.",
	}, []string{"guard"})
	rollbacks := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "precept_rules_rollbacks_total",
		Help: "Rules rolled back.",
	})
	ignored := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_rules_remote_changes_ignored_total",
		Help: "Changes fetched from the rules remote that precept did not record and did not take, by kind (unknown_branch, claim, unreadable, edit_refused, merge_held).",
	}, []string{"kind"})
	edits := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "precept_rules_remote_edits_total",
		Help: "Proposal texts edited on the rules remote and taken, with their approvals reset.",
	})
	// Every channel has a series from the start, so rates and alerts
	// read 0 rather than nothing.
	for _, via := range []string{rulefmt.ViaAPI, rulefmt.ViaConsole, rulefmt.ViaMCP, rulefmt.ViaSlack, rulefmt.ViaGit} {
		approvals.WithLabelValues(via)
		rejections.WithLabelValues(via)
	}
	var err error
	if ignored, err = register(reg, ignored); err != nil {
		return err
	}
	if edits, err = register(reg, edits); err != nil {
		return err
	}
	if approvals, err = register(reg, approvals); err != nil {
		return err
	}
	if rejections, err = register(reg, rejections); err != nil {
		return err
	}
	if guardBlocks, err = register(reg, guardBlocks); err != nil {
		return err
	}
	if rollbacks, err = register(reg, rollbacks); err != nil {
		return err
	}
	if _, err = register(reg, &proposalCounts{src: src, log: log}); err != nil {
		return err
	}
	src.OnChange(func(c rulefmt.Change) {
		switch c.Kind {
		case rulefmt.ApprovalRecorded:
			approvals.WithLabelValues(c.Via).Inc()
		case rulefmt.ProposalApproved:
			// An approval by a merge in git is recorded and completes the
			// proposal in one commit; API and Slack approvals were
			// counted as ApprovalRecorded.
			if c.Via == rulefmt.ViaGit {
				approvals.WithLabelValues(c.Via).Inc()
			}
		case rulefmt.ProposalRejected:
			rejections.WithLabelValues(c.Via).Inc()
		case rulefmt.DraftHeld, rulefmt.EvidenceAdded:
			guardBlocks.WithLabelValues(c.Guard).Inc()
		case rulefmt.RuleRolledBack:
			rollbacks.Inc()
		case rulefmt.RemoteChangeIgnored:
			ignored.WithLabelValues(c.Detail).Inc()
		case rulefmt.ProposalEdited:
			edits.Inc()
		}
	})
	return nil
}

// proposalCounts is precept_rules_proposals, read from the rules
// repository at scrape time (cheap: the manager rebuilds its state only
// when a ref moved). A failed read reports the last counts it had.
type proposalCounts struct {
	src RuleSource
	log *slog.Logger

	mu   sync.Mutex
	last map[rulefmt.ProposalStatus]int
}

var proposalsDesc = prometheus.NewDesc("precept_rules_proposals",
	"Rule proposals and held drafts in the rules repository, by status.", []string{"status"}, nil)

// scrapeTimeout bounds the read of the rules repository in a scrape.
const scrapeTimeout = 5 * time.Second

func (p *proposalCounts) Describe(ch chan<- *prometheus.Desc) { ch <- proposalsDesc }

func (p *proposalCounts) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := p.src.ProposalCounts(ctx)
	p.mu.Lock()
	if err != nil {
		if p.log != nil {
			p.log.Warn("count rule proposals for /metrics; reporting the last counts", "err", err)
		}
		counts = p.last
	} else {
		p.last = counts
	}
	p.mu.Unlock()
	for _, s := range proposalStatuses {
		ch <- prometheus.MustNewConstMetric(proposalsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// ProposalLister is what the approval-deadline gauge reads of a rule
// manager (rules.Manager).
type ProposalLister interface {
	List(ctx context.Context, f rules.ListFilter) ([]rulefmt.Proposal, error)
}

var _ ProposalLister = (*rules.Manager)(nil)

var overdueDesc = prometheus.NewDesc("precept_rules_proposals_overdue",
	"Pending rule proposals waiting for approval longer than rules.approval_sla (0 when deadlines are off).", nil, nil)

// ApprovalDeadline registers precept_rules_proposals_overdue on reg: the
// pending proposals that waited past the approval deadline sla
// (rules.Overdue; docs/lifecycle.md, "Approval deadlines"), read from the
// rules repository at scrape time. sla <= 0 reports 0. now is the clock
// (time.Now when nil).
func ApprovalDeadline(reg prometheus.Registerer, src ProposalLister, sla time.Duration, now func() time.Time, log *slog.Logger) error {
	if now == nil {
		now = time.Now
	}
	_, err := register(reg, &overdueCount{src: src, sla: sla, now: now, log: log})
	return err
}

// overdueCount is precept_rules_proposals_overdue. A failed read reports
// the last count it had.
type overdueCount struct {
	src ProposalLister
	sla time.Duration
	now func() time.Time
	log *slog.Logger

	mu   sync.Mutex
	last int
}

func (o *overdueCount) Describe(ch chan<- *prometheus.Desc) { ch <- overdueDesc }

func (o *overdueCount) Collect(ch chan<- prometheus.Metric) {
	n, err := o.count()
	o.mu.Lock()
	if err != nil {
		if o.log != nil {
			o.log.Warn("count overdue rule proposals for /metrics; reporting the last count", "err", err)
		}
		n = o.last
	} else {
		o.last = n
	}
	o.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, float64(n))
}

func (o *overdueCount) count() (int, error) {
	if o.sla <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	pending, err := o.src.List(ctx, rules.ListFilter{Status: rulefmt.Pending})
	if err != nil {
		return 0, err
	}
	n, now := 0, o.now()
	for _, p := range pending {
		if rules.Overdue(p, now, o.sla) > 0 {
			n++
		}
	}
	return n, nil
}
