// Package telemetry is preceptd's OpenTelemetry adapter: an OTLP/HTTP
// trace exporter, the Connect interceptor that gives each RPC a span, and
// the spans of a decision's life — read from the stream, stored, evaluated,
// cited by a drafted proposal (docs/telemetry.md).
//
// A decision's spans are recorded by different loops, possibly on
// different replicas, so they cannot share a parent span in memory.
// Instead every span of a decision is a root span whose trace id is
// derived from the decision id (DecisionTraceID): the same decision lands
// in the same trace wherever and whenever it is recorded, and nothing is
// remembered between the steps. Sampling by trace id ratio then keeps or
// drops a decision's spans together on every replica.
//
// Only this package imports OpenTelemetry; internal/app calls it from the
// hooks the domain packages already expose. With tracing off nothing here
// is built.
package telemetry
