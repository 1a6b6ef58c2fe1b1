// Package metrics exports what the domain packages measure as Prometheus
// collectors. The domain packages (precept, feedbackstore, evaluator,
// rules, prompts) declare small interfaces or expose counters and stay
// free of the Prometheus client; this package adapts them, one file per
// package, so every metric name precept publishes is found here.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// register registers c on reg, or returns the collector already
// registered under its name (a second component of the same kind in one
// process shares it). reg may be nil: c is then returned unregistered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
