package gitcli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func testOptions(t *testing.T) Options {
	return Options{Env: []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}}
}

// A remote that redirects elsewhere must not hand the token to the host
// it redirects to.
func TestTheTokenNeverGoesToAnotherHost(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		http.Error(w, "auth", http.StatusUnauthorized)
	}))
	defer other.Close()
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path+"?"+r.URL.RawQuery, http.StatusFound)
	}))
	defer first.Close()
	_, err := Open(context.Background(), first.URL+"/r.git", Auth{Password: "s3cret-token"}, testOptions(t), "main")
	if err == nil {
		t.Fatal("a redirected remote was accepted")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range seen {
		if a != "" {
			t.Fatalf("the host redirected to received credentials: %q", a)
		}
	}
}

// A remote that accepts the connection and never answers must not hold
// a sync past its context.
func TestAStalledRemoteReturnsWhenTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Open(ctx, "http://"+ln.Addr().String()+"/r.git", Auth{Password: "s3cret"}, testOptions(t), "main")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a silent remote was accepted")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open still blocked 10 s after its context ended")
	}
}

func TestCheckURLRefusesPasswordsInTheURLAndTokensOverPlainHTTP(t *testing.T) {
	for _, c := range []struct {
		url   string
		token bool
		want  string // "" when accepted
	}{
		{"https://example.com/r.git", true, ""},
		{"https://bot@example.com/r.git", true, ""},
		{"https://bot:pw-secret@example.com/r.git", false, "password"},
		{"http://example.com/r.git", false, ""},
		{"http://example.com/r.git", true, "plain http"},
		{"http://127.0.0.1:8/r.git", true, ""},
		{"http://localhost:8/r.git", true, ""},
		{"http://[::1]:8/r.git", true, ""},
		{"git@example.com:r.git", true, ""},
		{"ssh://git@example.com/r.git", false, ""},
		{"/srv/r.git", false, ""},
	} {
		err := CheckURL(c.url, c.token)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (token %v): %v", c.url, c.token, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s (token %v): %v, want an error about %s", c.url, c.token, err, c.want)
		case err != nil && strings.Contains(err.Error(), "pw-secret"):
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if _, err := Open(context.Background(), "http://example.com/r.git", Auth{Password: "t"}, testOptions(t)); err == nil ||
		!strings.Contains(err.Error(), "plain http") {
		t.Fatalf("Open with a token over plain http: %v", err)
	}
}

// Only the commands that talk to the remote see the credentials, and
// none sees precept's own secrets.
func TestGitSeesCredentialsOnlyWhenItTalksToTheRemote(t *testing.T) {
	t.Setenv("PRECEPT_API_TOKEN", "api-secret")
	t.Setenv("PRECEPT_OTLP_HEADERS", "authorization=otlp-secret")
	t.Setenv("PRECEPT_GIT_TOKEN", "git-token-secret")
	t.Setenv("PRECEPT_ADDR", "kept")
	c := &Clone{url: "https://example.com/r.git", dir: t.TempDir(), auth: Auth{Password: "the-password"},
		scope: credentialScope("https://example.com/r.git"), env: testOptions(t).Env}
	ctx := context.Background()
	printEnv := []string{"-c", "alias.penv=!env", "penv"}
	local, err := c.git(ctx, nil, printEnv...)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := c.remote(ctx, printEnv...)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"api-secret", "otlp-secret", "git-token-secret"} {
		if strings.Contains(local+remote, secret) {
			t.Errorf("git saw %s", secret)
		}
	}
	if strings.Contains(local, "the-password") || !strings.Contains(remote, "PRECEPT_GIT_PASSWORD=the-password") {
		t.Errorf("the password: local %v, remote %v", strings.Contains(local, "the-password"), strings.Contains(remote, "the-password"))
	}
	if !strings.Contains(local, "PRECEPT_ADDR=kept") {
		t.Error("an ordinary variable was dropped")
	}
}

// The credential helper answers only for the remote's protocol and host.
func TestTheCredentialHelperAnswersOnlyForTheRemote(t *testing.T) {
	url := "https://git.example.com:8443/r.git"
	c := &Clone{url: url, dir: t.TempDir(), auth: Auth{Username: "bot", Password: "scoped-secret"},
		scope: credentialScope(url), env: testOptions(t).Env}
	ctx := context.Background()
	fill := func(protocol, host string) (string, error) {
		return c.run(ctx, true, nil, []byte("protocol="+protocol+"\nhost="+host+"\n\n"), "credential", "fill")
	}
	if out, err := fill("https", "git.example.com:8443"); err != nil || !strings.Contains(out, "password=scoped-secret") {
		t.Fatalf("the remote itself: %q %v", out, err)
	}
	for _, other := range [][2]string{{"https", "evil.example.com"}, {"https", "git.example.com"}, {"http", "git.example.com:8443"}} {
		if out, err := fill(other[0], other[1]); strings.Contains(out, "scoped-secret") {
			t.Errorf("%s://%s got the password: %q %v", other[0], other[1], out, err)
		}
	}
}

func TestRedactURLHidesEveryCredential(t *testing.T) {
	for in, want := range map[string]string{
		"https://bot:s3cret@git.example.com/r.git":    "https://***@git.example.com/r.git",
		"https://bot:p@ss@word@git.example.com/r.git": "https://***@git.example.com/r.git",
		"https://token@git.example.com/a@b/r.git":     "https://***@git.example.com/a@b/r.git",
		"https://git.example.com/r.git":               "https://git.example.com/r.git",
		"git@github.com:org/r.git":                    "git@github.com:org/r.git",
		"/srv/git/r.git":                              "/srv/git/r.git",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
