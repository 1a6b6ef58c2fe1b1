package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/precept-dev/precept/internal/telemetry"
)

// Telemetry configures tracing (docs/telemetry.md). With OTLPEndpoint
// empty, the default, nothing is traced and nothing of OpenTelemetry is
// built.
type Telemetry struct {
	// OTLPEndpoint is the OTLP/HTTP receiver spans are sent to, e.g.
	// http://otel-collector:4318 (/v1/traces is appended to a URL
	// without a path); env PRECEPT_OTLP_ENDPOINT overrides it.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// OTLPHeaders are sent with every export request. Secrets belong in
	// OTLPHeadersFile or env PRECEPT_OTLP_HEADERS instead.
	OTLPHeaders map[string]string `yaml:"otlp_headers"`
	// OTLPHeadersFile names a file of headers, one "Name=value" a line
	// (blank lines and lines starting with # skipped), read at start:
	// e.g. a mounted secret holding an API key.
	OTLPHeadersFile string `yaml:"otlp_headers_file"`
	// SampleRatio is the share of traces kept: above 0, at most 1. To
	// trace nothing, leave OTLPEndpoint empty.
	SampleRatio float64 `yaml:"sample_ratio"`

	// headersEnv is env PRECEPT_OTLP_HEADERS: "Name=value,Name=value".
	headersEnv string
}

// headerNamePattern matches an HTTP header name (RFC 9110 token).
var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func defaultTelemetry() Telemetry {
	return Telemetry{SampleRatio: telemetry.DefaultSampleRatio}
}

// Enabled reports whether spans are exported.
func (t Telemetry) Enabled() bool { return t.OTLPEndpoint != "" }

// Headers returns the export request headers: OTLPHeaders, then those of
// OTLPHeadersFile, then those of env PRECEPT_OTLP_HEADERS, a later source
// replacing a header an earlier one set. Errors name the source and the
// line, never a value.
func (t Telemetry) Headers() (map[string]string, error) {
	out := maps.Clone(t.OTLPHeaders)
	if out == nil {
		out = map[string]string{}
	}
	for _, name := range slices.Sorted(maps.Keys(t.OTLPHeaders)) {
		if err := checkHeader(name, t.OTLPHeaders[name]); err != nil {
			return nil, invalid("telemetry.otlp_headers."+name, "%v", err)
		}
	}
	if t.OTLPHeadersFile != "" {
		b, err := os.ReadFile(t.OTLPHeadersFile)
		if err != nil {
			return nil, invalid("telemetry.otlp_headers_file", "%v", err)
		}
		if err := parseHeaders(string(b), "\n", out); err != nil {
			return nil, invalid("telemetry.otlp_headers_file", "%s: %v", t.OTLPHeadersFile, err)
		}
	}
	if t.headersEnv != "" {
		if err := parseHeaders(t.headersEnv, ",", out); err != nil {
			return nil, invalid("telemetry.otlp_headers", "env PRECEPT_OTLP_HEADERS: %v", err)
		}
	}
	return out, nil
}

// parseHeaders adds the "Name=value" items of text, split by sep, to
// out.
func parseHeaders(text, sep string, out map[string]string) error {
	for i, item := range strings.Split(text, sep) {
		item = strings.TrimSpace(item)
		if item == "" || strings.HasPrefix(item, "#") {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok {
			return fmt.Errorf("item %d is not Name=value", i+1)
		}
		if err := checkHeader(name, value); err != nil {
			return fmt.Errorf("item %d: %w", i+1, err)
		}
		out[name] = value
	}
	return nil
}

// checkHeader refuses what cannot be sent as a header. The error holds
// neither the value nor the name: the commonest mistakes ("Name: value",
// a bare token, base64 ending in "=") put the secret where the name goes.
func checkHeader(name, value string) error {
	if !headerNamePattern.MatchString(name) {
		return errors.New("not a valid Name=value header (write Name=value, not Name: value)")
	}
	if value == "" || strings.ContainsAny(value, "\r\n\x00") {
		return errors.New("the header's value is empty or holds a line break")
	}
	return nil
}

func (t Telemetry) validate() error {
	if t.SampleRatio <= 0 || t.SampleRatio > 1 {
		return invalid("telemetry.sample_ratio", "%v must be above 0 and at most 1 (to trace nothing, leave telemetry.otlp_endpoint empty)", t.SampleRatio)
	}
	if !t.Enabled() {
		return nil
	}
	if _, err := telemetry.ExportURL(t.OTLPEndpoint); err != nil {
		return invalid("telemetry.otlp_endpoint", "%v", err)
	}
	_, err := t.Headers()
	return err
}
