package precept_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// These tests keep the shape docs/architecture.md describes: packages in
// layers that import only downwards, domain packages free of adapters,
// a CLI that links no server code, types and files a reader can hold in
// their head, and comments that cite documents in the repository.

const module = "github.com/precept-dev/precept"

// domain are the packages that hold precept's logic; adapters to the
// outside world (Redis, Slack, Connect, Prometheus, OpenTelemetry) must
// not reach them, not even through a dependency.
var domain = []string{"", "feedbackstore", "lesson", "evaluator", "rules/rulefmt", "rules/gitstore", "rules", "analytics", "prompts", "clarification", "effect", "impact", "instructions"}

var adapterModules = []string{"github.com/redis/", "github.com/slack-go/", "connectrpc.com/", "github.com/prometheus/", "go.opentelemetry.io/"}

// serverModules must not be linked into the CLI, a thin Connect client.
var serverModules = []string{"github.com/go-git/", "go.etcd.io/bbolt", "github.com/redis/", "github.com/prometheus/", "github.com/alicebob/miniredis", "go.opentelemetry.io/"}

// Bounds a newcomer can live with.
const (
	maxMethods   = 40
	maxFileLines = 650
)

type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// listPackages runs go list over the module.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the architecture tests run go list: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(importPath string) (string, bool) {
	if importPath == module {
		return "", true
	}
	r, ok := strings.CutPrefix(importPath, module+"/")
	return r, ok
}

func TestPackagesImportOnlyLowerLayers(t *testing.T) {
	layers := readLayerTable(t).layers()
	for _, p := range listPackages(t) {
		from, _ := rel(p.ImportPath)
		lf, ok := layers[from]
		if !ok {
			t.Errorf("package %s has no layer: give it a row in the table of %s", p.ImportPath, architectureDoc)
			continue
		}
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if !ours {
				continue
			}
			if lt, ok := layers[to]; ok && lt >= lf {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must go to a lower layer", p.ImportPath, lf, imp, lt)
			}
		}
	}
}

func TestDomainPackagesLinkNoAdapters(t *testing.T) {
	for _, p := range listPackages(t) {
		r, _ := rel(p.ImportPath)
		if slices.Contains(domain, r) {
			for _, bad := range linked(p, adapterModules) {
				t.Errorf("domain package %s links %s (e.g. %s)", p.ImportPath, bad[0], bad[1])
			}
		}
		if r == "cmd/precept" {
			for _, bad := range linked(p, serverModules) {
				t.Errorf("the CLI links server code: %s (e.g. %s)", bad[0], bad[1])
			}
		}
	}
}

// linked returns each of prefixes that one of p's dependencies starts
// with, and such a dependency.
func linked(p goPackage, prefixes []string) [][2]string {
	var out [][2]string
	for _, prefix := range prefixes {
		for _, d := range p.Deps {
			if strings.HasPrefix(d, prefix) {
				out = append(out, [2]string{prefix, d})
				break
			}
		}
	}
	return out
}

// sourceFiles returns the module's Go files other than tests and
// generated code.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range listPackages(t) {
		if r, _ := rel(p.ImportPath); strings.HasPrefix(r, "gen/") {
			continue
		}
		r, _ := rel(p.ImportPath)
		for _, f := range p.GoFiles {
			out = append(out, filepath.Join(r, f))
		}
	}
	return out
}

func TestNoTypeHasMoreThanFortyMethods(t *testing.T) {
	methods := methodCounts(t, sourceFiles(t))
	for typ, n := range methods {
		if n > maxMethods {
			t.Errorf("%s has %d methods, more than %d: split it where its responsibilities part", typ, n, maxMethods)
		}
	}
}

func TestNoSourceFileIsLongerThanSixHundredFiftyLines(t *testing.T) {
	for _, path := range sourceFiles(t) {
		n := countLines(t, path)
		if n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d", path, n, maxFileLines)
		}
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

// outsideCitation matches references to design documents that are not
// in the repository.
var outsideCitation = regexp.MustCompile(`DESIGN\.md|seed 0{2}\d`)

func TestCommentsCiteOnlyDocumentsInTheRepository(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "node_modules" || path == "gen") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || path == "architecture_test.go" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if outsideCitation.MatchString(line) {
				t.Errorf("%s:%d cites a document outside the repository (cite docs/ instead): %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
