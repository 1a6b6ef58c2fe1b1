package examples

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestPythonClientFollowsNoRedirect: a server that redirects the client
// elsewhere must not get the bearer token sent on to the other host.
func TestPythonClientFollowsNoRedirect(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"name":"x","role":"reader"}`))
	}))
	defer other.Close()
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusFound)
	}))
	defer first.Close()
	script := `
import sys
sys.path.insert(0, "clients/python")
from precept_client import Client, PreceptError
try:
    Client(sys.argv[1], "py-secret-token").ping()
    print("no error")
except PreceptError as err:
    print(err.code, err.http_status, err.message)
`
	cmd := exec.Command(python, "-c", script, first.URL)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s (.ci/install-deps installs python3)", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range seen {
		if a != "" {
			t.Fatalf("the host redirected to received %q", a)
		}
	}
	if !strings.Contains(string(out), "redirect") || strings.HasPrefix(string(out), "no error") {
		t.Fatalf("the client printed %q, want an error about the redirect", out)
	}
}

// TestTypeScriptClientRefusesANumberThatIsNotWhole: a decision's
// numbers are whole (seconds); 1.5, NaN and Infinity throw instead of
// being cut to 1, "NaN" or "Infinity", as the Python client refuses them.
func TestTypeScriptClientRefusesANumberThatIsNotWhole(t *testing.T) {
	root := moduleRoot(t)
	buildTypeScript(t, root)
	script := `
import { flatFields } from "./clients/typescript/dist/src/index.js";
for (const v of [3, 1.5, NaN, Infinity]) {
  try {
    console.log(flatFields({ review_duration_seconds: v }).join("="));
  } catch (e) {
    console.log("error: " + e.message);
  }
}
`
	cmd := exec.Command("node", "--input-type=module", "-e", script)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s (.ci/install-deps installs node)", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 || lines[0] != "review_duration_seconds=3" {
		t.Fatalf("printed:\n%s", out)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "error: review_duration_seconds: ") {
			t.Errorf("a number that is not whole was accepted: %q", l)
		}
	}
}
