package console_test

// A test of the probe's finding (h5) that sign-in's next= could leave
// /ui/: it failed on six of these values before safeNext resolved them.

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
)

// A next= that leaves /ui/ once the browser resolves its dot segments
// was followed after sign-in.
func TestSignInRedirectsStayUnderUI(t *testing.T) {
	s := startServer(t, tokensYAML)
	for _, next := range []string{
		"/ui/../metrics", "/ui/%2e%2e/x", "/ui/%2E%2E/%2e%2E/x", "/ui/.%2e/x", "//evil.example", "/ui/\\evil",
		"https://evil/ui/", "/ui/./../../x", "/ui/..", "/ui/%2f%2fevil.example", "/ui/..%2fmetrics",
		"/\\evil.example/ui/", "http:/ui/x", "/ui/x\r\nSet-Cookie: a=b", "", "ui/queue",
	} {
		v := s.visitor(t)
		v.get("/ui/signin")
		status, loc := v.post("/ui/signin", url.Values{"token": {aliceToken}, "next": {next}})
		if status != http.StatusSeeOther {
			t.Errorf("next=%q: %d", next, status)
			continue
		}
		if !withinUI(loc) {
			t.Errorf("next=%q redirects to %q, outside /ui/", next, loc)
		}
	}
	// Ordinary targets are kept, with their query.
	for next, want := range map[string]string{"/ui/rules?agent=a&status=shadow": "/ui/rules?agent=a&status=shadow", "/ui/": "/ui/", "/ui/clusters/c-1": "/ui/clusters/c-1"} {
		v := s.visitor(t)
		v.get("/ui/signin")
		if _, loc := v.post("/ui/signin", url.Values{"token": {aliceToken}, "next": {next}}); loc != want {
			t.Errorf("next=%q redirects to %q, want %q", next, loc, want)
		}
	}
}

// withinUI reports whether a browser following Location loc from the
// console stays under /ui/: no scheme or host, no backslash, and no dot
// segment, plain or percent-encoded, left for the browser to resolve.
func withinUI(loc string) bool {
	if strings.ContainsAny(loc, "\\\r\n") || strings.Contains(strings.ToLower(loc), "%2e") {
		return false
	}
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || strings.HasPrefix(loc, "//") {
		return false
	}
	p := u.EscapedPath()
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p && strings.HasPrefix(p, "/ui/")
}
