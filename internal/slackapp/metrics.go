package slackapp

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	calls    *prometheus.CounterVec
	retrying prometheus.Gauge
	// reminders counts approval reminders posted (docs/lifecycle.md,
	// "Approval deadlines").
	reminders prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_slack_requests_total",
			Help: "Requests to the Slack endpoints by endpoint and outcome (ok, unauthorized, bad_request, ignored, ...).",
		}, []string{"endpoint", "outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_slack_api_calls_total",
			Help: "Calls to Slack's Web API by method and result (ok or error).",
		}, []string{"method", "result"}),
		retrying: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "precept_slack_posts_retrying",
			Help: "Proposals whose Slack message failed to post or update and waits for a retry.",
		}),
		reminders: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "precept_slack_approval_reminders_total",
			Help: "Reminders posted in the threads of proposals waiting past their approval deadline (rules.approval_sla).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.calls, m.retrying, m.reminders} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register slack metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) call(method string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.calls.WithLabelValues(method, result).Inc()
}
