package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept/lib/memlimit"
	"github.com/precept-dev/precept/lib/text"
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
	// twice what is live. Auto (the default) derives it from the
	// container's or machine's memory and lets the watchdog raise it; 0
	// leaves the runtime's default; GOMEMLIMIT wins when set
	// (docs/operations.md, "Memory").
	MemoryLimitMiB MemoryLimit `yaml:"memory_limit_mib"`
}

func defaultServer() Server {
	return Server{
		ReadHeaderTimeout:    10 * time.Second,
		BodyTimeout:          20 * time.Second,
		MaxBodyBytes:         8 << 20,
		MaxInFlightBodyBytes: 64 << 20,
		InFlightWait:         2 * time.Second,
		MemoryLimitMiB:       MemoryLimitAuto,
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
	if m := s.MemoryLimitMiB; m != MemoryLimitAuto && (m < 0 || (m > 0 && m < 64)) {
		return invalid("server.memory_limit_mib", "%d: use auto, 0 (no limit) or at least 64", int(m))
	}
	if m := s.MemoryLimitMiB; m > maxMemoryLimitMiB {
		return invalid("server.memory_limit_mib", "%d is more than any machine has: at most %d", int(m), maxMemoryLimitMiB)
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

// MemoryLimit is server.memory_limit_mib: a number of MiB, 0 for none,
// or MemoryLimitAuto, written "auto".
type MemoryLimit int

// MemoryLimitAuto derives the soft limit from the memory the process may
// use (lib/memlimit).
const MemoryLimitAuto MemoryLimit = -1

// maxMemoryLimitMiB (8 TiB) keeps the limit in bytes far from overflow.
const maxMemoryLimitMiB = 8 << 20

// Setting is the limit as lib/memlimit takes it.
func (m MemoryLimit) Setting() memlimit.Setting {
	if m == MemoryLimitAuto {
		return memlimit.Setting{Auto: true}
	}
	return memlimit.Setting{MiB: int(m)}
}

// String is the limit as the configuration writes it.
func (m MemoryLimit) String() string {
	if m == MemoryLimitAuto {
		return "auto"
	}
	return strconv.Itoa(int(m))
}

// UnmarshalYAML reads "auto" or a whole number of MiB. Its errors are
// type errors that keep their line, so the decoder names the key.
func (m *MemoryLimit) UnmarshalYAML(n *yaml.Node) error {
	bad := func(format string, args ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
	}
	if n.Kind != yaml.ScalarNode {
		return bad("use auto, 0 (no limit) or a number of MiB, at least 64")
	}
	if strings.EqualFold(n.Value, "auto") {
		*m = MemoryLimitAuto
		return nil
	}
	v, err := strconv.Atoi(n.Value)
	switch {
	case err != nil:
		return bad("%q: use auto, 0 (no limit) or a number of MiB, at least 64", text.Truncate(n.Value, 32))
	case v == int(MemoryLimitAuto):
		// Auto's inner value, written, is just a negative number.
		return bad("%d: use auto, 0 (no limit) or at least 64", v)
	}
	*m = MemoryLimit(v)
	return nil
}

// MarshalYAML writes the limit as the configuration does.
func (m MemoryLimit) MarshalYAML() (any, error) {
	if m == MemoryLimitAuto {
		return "auto", nil
	}
	return int(m), nil
}
