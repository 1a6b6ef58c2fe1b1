package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ChromaBinaryEnv names the environment variable that overrides the
// Chroma server binary (by default tools/chroma/node_modules/.bin/chroma,
// installed by `npm ci --prefix tools/chroma`).
const ChromaBinaryEnv = "PRECEPT_CHROMA_BIN"

// chromaBinary is the pinned server's launcher, relative to the repository
// root.
const chromaBinary = "tools/chroma/node_modules/.bin/chroma"

// chromaReadyTimeout bounds how long a started server may take to answer
// its heartbeat.
const chromaReadyTimeout = 60 * time.Second

// chromaStartAttempts bounds retries when another process takes the chosen
// port between picking it and the server binding it.
const chromaStartAttempts = 3

// chromaInstallHint tells a developer how to get the server.
const chromaInstallHint = "run `npm ci --prefix tools/chroma` (or .ci/run)"

// chromaShared is the server tests share in a binary whose TestMain calls
// RunWithChroma.
var chromaShared struct {
	mu      sync.Mutex
	enabled bool
	srv     *chromaServer
	err     error
}

// Chroma returns the base URL (http://127.0.0.1:port) of a real Chroma
// server, the pinned one from tools/chroma. In a test binary whose TestMain
// runs RunWithChroma, every test shares one server, started on first use:
// tests keep their data apart by using unique collection names. Otherwise
// each call starts a server with its data in t.TempDir(), stopped when the
// test ends. Under -short the test is skipped; a missing server binary
// fails it.
func Chroma(t testing.TB) (url string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs a Chroma server")
	}
	bin, err := findChroma()
	if err != nil {
		t.Fatal(err)
	}
	chromaShared.mu.Lock()
	defer chromaShared.mu.Unlock()
	if chromaShared.enabled {
		if chromaShared.srv == nil && chromaShared.err == nil {
			dir, err := os.MkdirTemp("", "precept-chroma-")
			if err != nil {
				chromaShared.err = err
			} else {
				chromaShared.srv, chromaShared.err = startChromaRetrying(bin, dir)
				if chromaShared.err != nil {
					os.RemoveAll(dir)
				}
			}
		}
		if chromaShared.err != nil {
			t.Fatalf("start chroma: %v", chromaShared.err)
		}
		return chromaShared.srv.url
	}
	srv, err := startChromaRetrying(bin, t.TempDir())
	if err != nil {
		t.Fatalf("start chroma: %v", err)
	}
	t.Cleanup(srv.stop)
	return srv.url
}

// RunWithChroma runs m with one Chroma server shared by all its tests and
// stops the server afterwards. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunWithChroma(m)) }
func RunWithChroma(m *testing.M) int { return withSharedChroma(m.Run) }

// withSharedChroma runs run with the shared server enabled and stops the
// server, if one started, afterwards.
func withSharedChroma(run func() int) int {
	chromaShared.mu.Lock()
	chromaShared.enabled = true
	chromaShared.mu.Unlock()
	defer func() {
		chromaShared.mu.Lock()
		defer chromaShared.mu.Unlock()
		if chromaShared.srv != nil {
			chromaShared.srv.stop()
			os.RemoveAll(chromaShared.srv.dir)
			chromaShared.srv = nil
		}
		chromaShared.enabled = false
		chromaShared.err = nil
	}()
	return run()
}

// findChroma returns the server launcher: $PRECEPT_CHROMA_BIN, else the
// pinned install under the repository root (found by walking up to go.mod).
func findChroma() (string, error) {
	if bin := os.Getenv(ChromaBinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("chroma server from $%s: %w (unset it to use tools/chroma: %s)", ChromaBinaryEnv, err, chromaInstallHint)
		}
		return bin, nil
	}
	root, err := chromaRepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, chromaBinary)
	if _, err := os.Stat(bin); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("chroma server not installed at %s: %s", bin, chromaInstallHint)
		}
		return "", fmt.Errorf("chroma server at %s: %w", bin, err)
	}
	return bin, nil
}

// chromaRepoRoot walks up from the working directory (a test's package
// directory) to the directory holding go.mod.
func chromaRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// chromaServer is a running server process.
type chromaServer struct {
	url    string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

// stop kills the server's process group and waits for it.
func (s *chromaServer) stop() {
	s.once.Do(func() {
		killChromaGroup(s.cmd)
		<-s.exited
	})
}

func startChromaRetrying(bin, dir string) (*chromaServer, error) {
	var lastErr error
	for range chromaStartAttempts {
		srv, err := startChroma(bin, dir)
		if err == nil {
			return srv, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// startChroma makes one attempt to start a server on a free loopback port
// with its data in dir; on failure the process is gone and the error
// carries the server's own output.
func startChroma(bin, dir string) (*chromaServer, error) {
	port, err := pickChromaPort()
	if err != nil {
		return nil, err
	}
	out := &chromaOutput{}
	cmd := exec.Command(bin, "run", "--path", dir, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	setChromaProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w (%s)", bin, err, chromaInstallHint)
	}
	srv := &chromaServer{
		url:    "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:    dir,
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait()
		close(srv.exited)
	}()
	if err := waitForChroma(srv.url, srv.exited); err != nil {
		srv.stop()
		return nil, fmt.Errorf("%w; server output:\n%s", err, out.String())
	}
	return srv, nil
}

// waitForChroma polls the heartbeat until it answers 200, the process
// exits or the deadline passes.
func waitForChroma(base string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(chromaReadyTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("chroma on %s exited before answering its heartbeat", base)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := chromaHeartbeat(ctx, client, base)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chroma on %s did not answer its heartbeat within %s: %w", base, chromaReadyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func chromaHeartbeat(ctx context.Context, client *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v2/heartbeat", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heartbeat: HTTP %d", resp.StatusCode)
	}
	return nil
}

// pickChromaPort asks the kernel for a free loopback port. Another process
// may take it before the server binds it; startChromaRetrying retries then.
func pickChromaPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// chromaOutput collects the server's output, which os/exec writes from
// its own goroutine while the harness may read it.
type chromaOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *chromaOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	// The server logs little; cap it anyway so a chatty one cannot grow
	// without bound over a long test binary.
	if b.buf.Len() > 1<<20 {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *chromaOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
