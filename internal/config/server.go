package config

import (
	"fmt"
	"time"
)

// Server bounds what one request may cost the API server before it is
// answered (docs/thresholds.md): how long its headers and body may take
// to arrive, how large its body may be, and how many body bytes all
// requests together may hold.
type Server struct {
	// ReadHeaderTimeout bounds how long a request's headers may take.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyTimeout bounds how long a request's body may take to arrive
	// once its headers have. A streamed answer (WatchPrompt) is not
	// bounded by it.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// MaxBodyBytes is the largest request body: room for an event of
	// ingest.max_event_bytes and its envelopes.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// MaxInFlightBodyBytes bounds the body bytes of all requests being
	// received or answered at once.
	MaxInFlightBodyBytes int `yaml:"max_in_flight_body_bytes"`
	// InFlightWait is how long a request waits for room under
	// MaxInFlightBodyBytes before it is refused.
	InFlightWait time.Duration `yaml:"in_flight_wait"`
	// MemoryLimitMiB is the Go runtime's soft memory limit: past it the
	// garbage collector works harder rather than let the heap grow to
	// twice what is live. 0 leaves the runtime's default (or GOMEMLIMIT,
	// which wins when set).
	MemoryLimitMiB int `yaml:"memory_limit_mib"`
}

func defaultServer() Server {
	return Server{
		ReadHeaderTimeout:    10 * time.Second,
		BodyTimeout:          20 * time.Second,
		MaxBodyBytes:         8 << 20,
		MaxInFlightBodyBytes: 64 << 20,
		InFlightWait:         2 * time.Second,
		MemoryLimitMiB:       512,
	}
}

func (s Server) validate() error {
	for _, d := range []struct {
		key string
		val time.Duration
	}{
		{"server.read_header_timeout", s.ReadHeaderTimeout},
		{"server.body_timeout", s.BodyTimeout},
		{"server.in_flight_wait", s.InFlightWait},
	} {
		if d.val <= 0 {
			return invalid(d.key, "must be a positive duration such as 500ms or 2s")
		}
	}
	if s.MaxBodyBytes < 64<<10 || s.MaxBodyBytes > 1<<30 {
		return invalid("server.max_body_bytes", "%d is outside %d..%d", s.MaxBodyBytes, 64<<10, 1<<30)
	}
	if s.MemoryLimitMiB < 0 || (s.MemoryLimitMiB > 0 && s.MemoryLimitMiB < 64) {
		return invalid("server.memory_limit_mib", "%d: use 0 (no limit) or at least 64", s.MemoryLimitMiB)
	}
	if s.MaxInFlightBodyBytes < s.MaxBodyBytes {
		return invalid("server.max_in_flight_body_bytes", "%d is less than server.max_body_bytes (%d): the largest request could never be received", s.MaxInFlightBodyBytes, s.MaxBodyBytes)
	}
	return nil
}

// validateBodies checks that the API can receive the largest event.
func (c Config) validateBodies() error {
	if c.Server.MaxBodyBytes < c.Ingest.MaxEventBytes {
		return fmt.Errorf("config: server.max_body_bytes: %d is less than ingest.max_event_bytes (%d)", c.Server.MaxBodyBytes, c.Ingest.MaxEventBytes)
	}
	return nil
}
