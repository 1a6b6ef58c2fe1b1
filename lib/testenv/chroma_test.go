package testenv

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func wantStopped(t *testing.T, base string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", u.Host, 200*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("chroma on %s still accepts connections after it was stopped", base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestChromaServesThePinnedServerOnLoopback(t *testing.T) {
	base := Chroma(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	if host := u.Hostname(); host != "127.0.0.1" {
		t.Errorf("host = %q, want 127.0.0.1", host)
	}
	if code, body := get(t, base+"/api/v2/heartbeat"); code != http.StatusOK || !strings.Contains(body, "nanosecond heartbeat") {
		t.Fatalf("heartbeat: %d %s", code, body)
	}
	// tools/chroma pins chromadb 3.0.10, whose server reports 1.0.0.
	if code, body := get(t, base+"/api/v2/version"); code != http.StatusOK || strings.Trim(body, "\"\n") != "1.0.0" {
		t.Errorf("version: %d %s, want 1.0.0", code, body)
	}
}

func TestChromaIsStoppedWhenTheTestEnds(t *testing.T) {
	var base string
	t.Run("inner", func(t *testing.T) {
		base = Chroma(t)
	})
	wantStopped(t, base)
}

func TestChromaSharedServerServesEveryTestAndStopsAfterTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs a Chroma server")
	}
	var first, second string
	withSharedChroma(func() int {
		t.Run("first", func(t *testing.T) { first = Chroma(t) })
		t.Run("second", func(t *testing.T) { second = Chroma(t) })
		if first != second {
			t.Errorf("shared server: first test got %s, second %s", first, second)
		}
		// Still up between tests.
		if code, _ := get(t, second+"/api/v2/heartbeat"); code != http.StatusOK {
			t.Errorf("heartbeat after the first test ended: %d", code)
		}
		return 0
	})
	wantStopped(t, first)
}

func TestChromaBinaryOverrideMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-chroma")
	t.Setenv(ChromaBinaryEnv, missing)
	_, err := findChroma()
	if err == nil || !strings.Contains(err.Error(), ChromaBinaryEnv) {
		t.Fatalf("findChroma with a missing override: %v, want an error naming $%s", err, ChromaBinaryEnv)
	}
}

func TestChromaStartFailureCarriesTheServerOutput(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "fake-chroma")
	script := "#!/bin/sh\necho 'fake chroma: cannot open bindings' >&2\nexit 3\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := startChroma(bin, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "cannot open bindings") {
		t.Fatalf("start a server that exits: %v, want its output in the error", err)
	}
}

func TestChromaFindsThePinnedInstallFromAPackageDirectory(t *testing.T) {
	t.Setenv(ChromaBinaryEnv, "")
	bin, err := findChroma()
	if err != nil {
		t.Fatalf("findChroma: %v", err)
	}
	if !strings.HasSuffix(bin, filepath.FromSlash(chromaBinary)) {
		t.Errorf("bin = %s, want the pinned install %s", bin, chromaBinary)
	}
}
