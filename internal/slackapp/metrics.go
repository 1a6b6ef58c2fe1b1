package slackapp

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	calls    *prometheus.CounterVec
	retrying prometheus.Gauge
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
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.calls, m.retrying} {
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
