package precept_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

// These tests run the documentation as a new user would
// (docs/README.md, "Examples that run"): every shell block of README.md
// and of the docs/ pages, in order, in one shell per page, in a fresh
// copy of the tree, against a real preceptd that the blocks start with
// `make run`, with the real redis-cli and the CLI the blocks build. Where
// a page shows a block's output, the output must match after ids,
// hashes and times are normalised. A block that is not meant to run
// says so with a marker in the line before it:
//
//	<!-- readme-test: skip REASON -->       not run; the test lists why
//	<!-- readme-test: background -->        run as in a second terminal, until the page ends
//	                                        or a later block stops it; the test goes on once
//	                                        preceptd answers
//	<!-- readme-test: stop-background -->   first stop the background block (Ctrl-C)

// docPages are the pages whose shell blocks run.
var docPages = []string{"README.md", "docs/*.md", "docs/decisions/*.md"}

// The ports the examples name; they must be free.
var docPorts = []string{"127.0.0.1:8080", "127.0.0.1:6380"}

const (
	// blockTimeout bounds one block: the first `make build` or `make
	// run` of a fresh copy compiles preceptd.
	blockTimeout = 8 * time.Minute
	markerPrefix = "<!-- readme-test:"
)

// docBlock is one fenced shell block of a page.
type docBlock struct {
	page   string
	line   int
	code   string
	marker string // "", "skip …", "background", "stop-background"
	// output is the block shown after it, if any; hasOutput tells an
	// empty one from none.
	output    string
	hasOutput bool
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

var fence = regexp.MustCompile("^```([a-z]*)\\s*$")

// parseBlocks reads the fenced blocks of a page: shell blocks (sh, bash,
// shell) with the marker before them and the plain block right after
// them, their shown output.
func parseBlocks(page, text string) ([]docBlock, error) {
	lines := strings.Split(text, "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		body, end, err := fenced(lines, i)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", page, i+1, err)
		}
		lang := m[1]
		if lang != "sh" && lang != "bash" && lang != "shell" {
			if lang == "console" {
				return nil, fmt.Errorf("%s:%d: a console block: write the commands as a sh block and the output as a plain block after it", page, i+1)
			}
			i = end
			continue
		}
		b := docBlock{page: page, line: i + 1, code: body}
		if prev := previousLine(lines, i); strings.HasPrefix(prev, markerPrefix) {
			b.marker = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(prev, markerPrefix), "-->"))
			if kind, _, _ := strings.Cut(b.marker, " "); kind != "skip" && kind != "background" && kind != "stop-background" {
				return nil, fmt.Errorf("%s:%d: unknown marker %q", page, i+1, b.marker)
			}
			if b.marker == "skip" {
				return nil, fmt.Errorf("%s:%d: a skip marker says why", page, i+1)
			}
		}
		i = end
		if j := nextLine(lines, i); j >= 0 && strings.TrimSpace(lines[j]) == "```" {
			shown, oend, err := fenced(lines, j)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", page, j+1, err)
			}
			b.output, b.hasOutput, i = shown, true, oend
		}
		out = append(out, b)
	}
	return out, nil
}

// fenced returns the body of the block whose fence opens at line i, and
// the line of its closing fence.
func fenced(lines []string, i int) (string, int, error) {
	for j := i + 1; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == "```" {
			return strings.Join(lines[i+1:j], "\n"), j, nil
		}
	}
	return "", 0, fmt.Errorf("unclosed code block")
}

func previousLine(lines []string, i int) string {
	for j := i - 1; j >= 0; j-- {
		if s := strings.TrimSpace(lines[j]); s != "" {
			return s
		}
	}
	return ""
}

func nextLine(lines []string, i int) int {
	for j := i + 1; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) != "" {
			return j
		}
	}
	return -1
}

// Output is compared after what changes from run to run is replaced:
// times, stream entry ids, git hashes and durations.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`), "<time>"},
	{regexp.MustCompile(`\b\d{13}-\d+\b`), "<entry>"},
	// A hash stands alone: "p-7c3d8e9032" is an id precept derives from
	// content, and stays.
	{regexp.MustCompile(`(^|[^-\w])[0-9a-f]{7,40}\b`), "${1}<hash>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "<duration>"},
}

// normalise returns the lines of s as compared: variable parts replaced,
// runs of white space as one space, blank lines at either end dropped.
func normalise(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, n := range normalisers {
			l = n.re.ReplaceAllString(l, n.with)
		}
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// matchOutput reports whether got matches the output a page shows,
// where a line "..." stands for any number of lines.
func matchOutput(shown, got string) bool {
	return matchLines(normalise(shown), normalise(got))
}

func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && matchLines(want[1:], got[1:])
}

func TestDocumentationParsingAndMatching(t *testing.T) {
	page := "intro\n<!-- readme-test: skip a synopsis -->\n```sh\nprecept thing [--flag]\n```\n\n```sh\necho hi\n```\n\n```\nhi\n```\n" +
		"<!-- readme-test: background -->\n```sh\nmake run\n```\n```yaml\na: 1\n```\n"
	blocks, err := parseBlocks("p.md", page)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[0].marker != "skip a synopsis" || blocks[1].output != "hi" || !blocks[1].hasOutput ||
		blocks[2].marker != "background" || blocks[2].hasOutput || blocks[1].line != 7 {
		t.Fatalf("blocks = %+v", blocks)
	}
	for _, bad := range []string{"<!-- readme-test: sometimes -->\n```sh\nx\n```\n", "<!-- readme-test: skip -->\n```sh\nx\n```\n", "```sh\nx\n", "```console\n$ x\n```\n"} {
		if _, err := parseBlocks("p.md", bad); err == nil {
			t.Errorf("parseBlocks(%q) = nil error", bad)
		}
	}
	shown := "stored    2026-11-22T11:45:53Z from stream:1795347953794-0 in commit 9c9f7eeb4def\n...\np-7c3d8e9032  PENDING"
	got := "\nstored 2026-11-27T16:00:30.5Z from stream:1795795230647-12 in commit 0123abc\nmore\nlines\np-7c3d8e9032 PENDING\n\n"
	if !matchOutput(shown, got) {
		t.Fatalf("%q does not match %q: %q vs %q", got, shown, normalise(got), normalise(shown))
	}
	for _, differs := range []string{"p-7c3d8e9033 PENDING", "stored x\np-7c3d8e9032 PENDING", got + "extra"} {
		if matchOutput(shown, differs) {
			t.Errorf("%q matches %q", differs, shown)
		}
	}
}

func TestDocumentationExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs preceptd as a user would")
	}
	for _, tool := range []string{"bash", "git", "make", "go", "redis-cli", "promtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the examples need %s on PATH (.ci/install-deps installs it): %v", tool, err)
		}
	}
	for _, addr := range docPorts {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the examples use %s as a new user has it, and something listens there (a `make run`?): %v", addr, err)
		}
		l.Close()
	}
	var pages []string
	for _, p := range docPages {
		m, _ := filepath.Glob(p)
		pages = append(pages, m...)
	}
	tree := copyTree(t)
	skipped := map[string][]string{}
	ran := 0
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseBlocks(page, string(data))
		if err != nil {
			t.Fatal(err)
		}
		var run []docBlock
		for _, b := range blocks {
			if reason, ok := strings.CutPrefix(b.marker, "skip "); ok {
				skipped[reason] = append(skipped[reason], b.where())
				continue
			}
			run = append(run, b)
		}
		if len(run) == 0 {
			continue
		}
		t.Run(page, func(t *testing.T) {
			// Each page starts with no data, as a new user's would.
			if err := os.RemoveAll(filepath.Join(tree, "data")); err != nil {
				t.Fatal(err)
			}
			runPage(t, tree, run)
		})
		ran += len(run)
	}
	n := 0
	for _, reason := range slices.Sorted(maps.Keys(skipped)) {
		where := skipped[reason]
		n += len(where)
		t.Logf("skipped %d: %s (%s)", len(where), reason, strings.Join(where, ", "))
	}
	t.Logf("ran %d shell blocks, skipped %d", ran, n)
	if ran == 0 {
		t.Fatal("no shell block ran")
	}
}

// copyTree copies the files git tracks (and the untracked ones it does
// not ignore) to a directory kept across runs, so a fresh copy costs no
// more to build than the last: Go's build cache keys on the directory.
func copyTree(t *testing.T) string {
	t.Helper()
	top, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256([]byte(top))
	dir := filepath.Join(cache, "precept-doc-examples", hex.EncodeToString(sum[:6]))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		info, err := os.Lstat(f)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(filepath.Join(dir, "data"))
		}
	})
	return dir
}

// runPage runs a page's blocks in order in one bash session, as typed
// in one terminal: a block must exit 0, and match the output shown.
func runPage(t *testing.T, dir string, blocks []docBlock) {
	sh := startShell(t, dir)
	var bg *background
	defer func() { bg.stop(t) }()
	for _, b := range blocks {
		switch b.marker {
		case "background":
			bg.stop(t)
			bg = startBackground(t, dir, b)
			continue
		case "stop-background":
			bg.stop(t)
			bg = nil
		}
		got, err := sh.run(b.code, blockTimeout)
		if err != nil {
			t.Fatalf("%s: %v\n--- the block:\n%s\n--- printed:\n%s%s", b.where(), err, b.code, got, bg.tail())
		}
		if b.hasOutput && !matchOutput(b.output, got) {
			t.Fatalf("%s: the output differs from what the page shows\n--- the block:\n%s\n--- shown:\n%s\n--- printed:\n%s", b.where(), b.code, b.output, got)
		}
	}
}

// shell is one bash session reading blocks from a pipe. What it prints
// is read for its whole life, so a command that prints between blocks
// never blocks on a full pipe.
type shell struct {
	in   io.Writer
	done chan struct{}
	n    int

	mu   sync.Mutex
	out  []string // lines printed and not yet taken by run
	eof  bool
	more chan struct{}
}

func startShell(t *testing.T, dir string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir = dir
	cmd.Env = userEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s := &shell{in: in, done: make(chan struct{}), more: make(chan struct{}, 1)}
	go s.read(r)
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		// Whatever the blocks left running (a `make run &`) ends with
		// the session, and is gone before the next page starts one.
		if !stopGroup(cmd.Process.Pid, syscall.SIGTERM) {
			t.Errorf("processes the page started were still running 30s after SIGTERM, and were killed")
		}
		<-s.done
	})
	// A failing command ends the session, as `set -e` ends a script.
	fmt.Fprintln(in, "set -eo pipefail; exec 2>&1")
	return s
}

func (s *shell) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		s.mu.Lock()
		if line != "" {
			s.out = append(s.out, strings.TrimSuffix(line, "\n"))
		}
		s.eof = err != nil
		s.mu.Unlock()
		select {
		case s.more <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// run sends one block and returns what it printed. The block's commands
// read no input from the session (they get /dev/null), so none can eat
// the lines that follow. A block that fails ends the session with an
// error.
func (s *shell) run(code string, timeout time.Duration) (string, error) {
	s.n++
	end := fmt.Sprintf("__doc_block_%d_done__", s.n)
	if _, err := fmt.Fprintf(s.in, "{\n%s\n} </dev/null\necho; echo %s\n", code, end); err != nil {
		return "", fmt.Errorf("the shell ended: %w", err)
	}
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		if i := slices.Index(s.out, end); i >= 0 {
			// The echo before the marker ends a last line left open, or
			// adds an empty one.
			lines := s.out[:i]
			if n := len(lines); n > 0 && lines[n-1] == "" {
				lines = lines[:n-1]
			}
			out := strings.Join(lines, "\n")
			s.out = s.out[i+1:]
			s.mu.Unlock()
			return out, nil
		}
		if s.eof {
			out := strings.Join(s.out, "\n")
			s.mu.Unlock()
			return out, fmt.Errorf("a command failed and ended the shell")
		}
		s.mu.Unlock()
		select {
		case <-s.more:
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			return strings.Join(s.out, "\n"), fmt.Errorf("still running after %s", timeout)
		}
	}
}

// stopGroup sends sig to the process group pgid and waits until no
// process of it is left; after 30s it kills what is left and reports
// false.
func stopGroup(pgid int, sig syscall.Signal) bool {
	gone := func(within time.Duration) bool {
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if syscall.Kill(-pgid, 0) == syscall.ESRCH {
				return true
			}
		}
		return false
	}
	syscall.Kill(-pgid, sig)
	if gone(30 * time.Second) {
		return true
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	gone(10 * time.Second)
	return false
}

// userEnv is the test's environment less what would make the examples
// see something a new user's shell does not: precept's own variables,
// and those of the make that runs the tests (a nested make announces
// its directories, and GO names the go command it echoes).
func userEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "PRECEPT_") && !strings.HasPrefix(name, "MAKE") && name != "MFLAGS" && name != "GO" &&
			!strings.HasPrefix(name, "GIT_CONFIG") {
			env = append(env, kv)
		}
	}
	// Git as it comes: this machine's git configuration (colours,
	// signing, pagers) does not change what the examples print.
	return append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
}

// background is a block run as in a second terminal.
type background struct {
	cmd  *exec.Cmd
	log  *testenv.SyncBuffer
	done chan struct{}
}

func startBackground(t *testing.T, dir string, b docBlock) *background {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", b.code)
	cmd.Dir = dir
	cmd.Env = userEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	bg := &background{cmd: cmd, log: &testenv.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = bg.log, bg.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(bg.done) }()
	// The reader of the page waits for the server to come up before
	// typing in the other terminal.
	deadline := time.Now().Add(blockTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get("http://" + docPorts[0] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return bg
			}
		}
		select {
		case <-bg.done:
			t.Fatalf("%s: the background block ended before preceptd was ready\n%s", b.where(), bg.log.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			bg.stop(t)
			t.Fatalf("%s: preceptd not ready after %s\n%s", b.where(), blockTimeout, bg.log.String())
		}
	}
}

// stop interrupts the block as Ctrl-C would, and waits until every
// process it started is gone, so the ports are free again.
func (bg *background) stop(t *testing.T) {
	if bg == nil {
		return
	}
	if !stopGroup(bg.cmd.Process.Pid, syscall.SIGINT) {
		t.Errorf("the background block did not stop on Ctrl-C within 30s\n%s", bg.log.String())
	}
	<-bg.done
}

// tail is the end of the background block's output, for a failure
// report.
func (bg *background) tail() string {
	if bg == nil {
		return ""
	}
	s := bg.log.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return "\n--- the background block printed:\n" + s
}

// The README's configuration block is the embedded defaults, as it says:
// preceptd reads it as a file, and nothing in it differs from what
// preceptd runs with when given none.
func TestREADMEConfigurationIsTheDefaults(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```").FindAllStringSubmatch(string(data), -1)
	if len(blocks) != 1 {
		t.Fatalf("README.md has %d yaml blocks, want the one configuration block", len(blocks))
	}
	cfg, err := config.Parse(blocks[0][1], nil)
	if err != nil {
		t.Fatalf("preceptd refuses the README's configuration: %v", err)
	}
	def := config.Default()
	cfg.Node = def.Node // the host name
	// An empty list or map in the file is none.
	empty := regexp.MustCompile(`(\[\]|\{\})`)
	got, _ := json.MarshalIndent(cfg, "", " ")
	want, _ := json.MarshalIndent(def, "", " ")
	if g, w := empty.ReplaceAllString(string(got), "null"), empty.ReplaceAllString(string(want), "null"); g != w {
		t.Fatalf("the README's configuration differs from the embedded defaults:\n%s", lineDiff(w, g))
	}
}

// lineDiff lists the lines of got that differ from want, position by
// position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "default %s\nREADME  %s\n", strings.TrimSpace(wl), strings.TrimSpace(gl))
		}
	}
	return b.String()
}

// The session survives what a page's commands may do: read standard
// input, print from the background between blocks, fail.
func TestDocumentationShellSession(t *testing.T) {
	sh := startShell(t, t.TempDir())
	if out, err := sh.run("export GREETING=hi\ncat; echo read-nothing", 10*time.Second); err != nil || out != "read-nothing" {
		t.Fatalf("a block with cat: %q, %v", out, err)
	}
	if out, err := sh.run("for i in $(seq 20000); do echo noise; done &\nwait", time.Minute); err != nil || strings.Count(out, "noise") != 20000 {
		t.Fatalf("a block printing from the background: %d lines, %v", strings.Count(out, "noise"), err)
	}
	if out, err := sh.run(`echo "$GREETING again"`, 10*time.Second); err != nil || out != "hi again" {
		t.Fatalf("the session forgot its variables: %q, %v", out, err)
	}
	if out, err := sh.run("echo before; false; echo after", 10*time.Second); err == nil || !strings.Contains(out, "before") || strings.Contains(out, "after") {
		t.Fatalf("a failing command did not end the session: %q, %v", out, err)
	}
}
