package app

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const goodTaxonomy = `categories:
  - id: zorb-problem
    group: test
    name: Zorb problem
    description: The zorb is wrong.
    rule: Keep the zorb right.
    cues: [zorblax]
`

// get returns the status and body of a GET.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestABrokenTaxonomyFileIsLoggedCountedAndNamedByReadyz(t *testing.T) {
	path := filepath.Join(t.TempDir(), "taxonomy.yaml")
	if err := os.WriteFile(path, []byte(goodTaxonomy), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, "evaluator: {taxonomy_file: "+path+"}")
	base := r.app.URL()
	if code, body := get(t, base+"/readyz"); code != 200 || strings.Contains(body, "degraded") {
		t.Fatalf("readyz with a good file = %d %q", code, body)
	}

	// An edit that breaks the file: a YAML alias bomb.
	bomb := "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\ncategories: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
	later := time.Now().Add(time.Second)
	if err := os.WriteFile(path, []byte(bomb), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, later, later)
	eventually(t, "the failed reload logged", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "reload failed") && strings.Contains(r.logs.String(), path)
	})
	code, body := get(t, base+"/readyz")
	if code != 200 || !strings.Contains(body, "degraded: "+path) {
		t.Fatalf("readyz with a broken file = %d %q: want ready, naming the file", code, body)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{
		`precept_config_reload_errors_total{file="` + path + `"} 1`,
		`precept_config_reload_broken{file="` + path + `"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if _, ok := r.app.Lessons.Classifier().Taxonomy().Category("zorb-problem"); !ok {
		t.Error("the last good taxonomy is no longer served")
	}

	// Fixed again: ready without detail, and said so in the log.
	fixed := time.Now().Add(2 * time.Second)
	if err := os.WriteFile(path, []byte(goodTaxonomy), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, fixed, fixed)
	eventually(t, "the fix logged", 10*time.Second, func() bool {
		return strings.Contains(r.logs.String(), "reloaded after a failure")
	})
	if code, body := get(t, base+"/readyz"); code != 200 || strings.Contains(body, "degraded") {
		t.Fatalf("readyz after the fix = %d %q", code, body)
	}
}
