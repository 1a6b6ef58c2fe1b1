package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTelemetryIsOffByDefault(t *testing.T) {
	d := Default()
	if d.Telemetry.Enabled() || d.Telemetry.SampleRatio != 1 {
		t.Fatalf("default telemetry = %+v", d.Telemetry)
	}
}

// Export headers come from the file, a headers file and the environment,
// later sources winning; a bad one is refused without its value.
func TestTelemetryHeadersComeFromTheFileASecretFileAndTheEnvironment(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "otlp-headers")
	os.WriteFile(secret, []byte("# mounted secret\nAuthorization=Bearer file-secret-0123\n\nX-Scope=team-a\n"), 0o600)
	env := map[string]string{"PRECEPT_OTLP_ENDPOINT": "https://otlp.example.com", "PRECEPT_OTLP_HEADERS": "X-Scope=team-b, X-Env = prod"}
	cfg, err := Parse("telemetry: {otlp_headers: {X-Tenant: precept, X-Scope: none}, otlp_headers_file: "+secret+", sample_ratio: 0.25}", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Telemetry.OTLPEndpoint != "https://otlp.example.com" || !cfg.Telemetry.Enabled() {
		t.Fatalf("endpoint = %q", cfg.Telemetry.OTLPEndpoint)
	}
	h, err := cfg.Telemetry.Headers()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"X-Tenant": "precept", "Authorization": "Bearer file-secret-0123", "X-Scope": "team-b", "X-Env": "prod"}
	if len(h) != len(want) {
		t.Fatalf("headers = %v, want %v", h, want)
	}
	for k, v := range want {
		if h[k] != v {
			t.Fatalf("headers = %v, want %v", h, want)
		}
	}

	for _, bad := range []struct{ env, file, key string }{
		{env: "Authorization: Bearer env-secret-0123", key: "PRECEPT_OTLP_HEADERS"},
		{env: "Bad Name=env-secret-0123", key: "PRECEPT_OTLP_HEADERS"},
		{file: "Authorization=Bearer file-secret-0123\nX-Other\n", key: "telemetry.otlp_headers_file"},
		// "Name: value" with base64 padding, and a bare token: the text
		// before the first "=" is the secret, not a name to repeat.
		{file: "Authorization: Basic file-secret-0123xyz=\n", key: "telemetry.otlp_headers_file"},
		{file: "file-secret-0123xyz=\n", key: "telemetry.otlp_headers_file"},
	} {
		path := filepath.Join(t.TempDir(), "h")
		os.WriteFile(path, []byte(bad.file), 0o600)
		_, err := Parse("telemetry: {otlp_endpoint: http://127.0.0.1:4318, otlp_headers_file: "+path+"}", func(k string) string {
			if k == "PRECEPT_OTLP_HEADERS" {
				return bad.env
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), bad.key) || strings.Contains(err.Error(), "secret-0123") {
			t.Errorf("headers %q / %q: %v; want an error naming %s without the value", bad.env, bad.file, err, bad.key)
		}
	}
}

func TestInvalidTelemetrySettingsNameTheirKey(t *testing.T) {
	for _, tc := range []struct{ yaml, key string }{
		{"telemetry: {sample_ratio: 1.5}", "telemetry.sample_ratio"},
		{"telemetry: {sample_ratio: -0.1}", "telemetry.sample_ratio"},
		{"telemetry: {sample_ratio: 0}", "telemetry.sample_ratio"},
		{"telemetry: {otlp_endpoint: collector:4318}", "telemetry.otlp_endpoint"},
		{"telemetry: {otlp_endpoint: 'ftp://collector'}", "telemetry.otlp_endpoint"},
		{"telemetry: {otlp_endpoint: 'http://user:pw@collector:4318'}", "telemetry.otlp_endpoint"},
		{"telemetry: {otlp_endpoint: 'http://collector:4318', otlp_headers_file: /nonexistent/h}", "telemetry.otlp_headers_file"},
		{"telemetry: {otlp_endpoint: 'http://collector:4318', otlp_headers: {X-Key: \"a\\nb\"}}", "telemetry.otlp_headers.X-Key"},
		{"telemetry: {otlp_endpont: 'http://collector:4318'}", "otlp_endpont"},
	} {
		_, err := Parse(tc.yaml, nil)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want an error naming %s", tc.yaml, err, tc.key)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("%s: the error quotes the credentials: %v", tc.yaml, err)
		}
	}
}
