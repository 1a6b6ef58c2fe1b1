// Package testenv starts the real servers precept's integration tests run
// against (docs/architecture.md, "Tests run against real servers"): each helper starts a fresh server on a free
// loopback port, waits until it answers and stops it when the test ends.
// Helpers skip under -short; when a server cannot be started they fail the
// test with what to install, never skip silently. The package also holds
// the small helpers several packages' tests share: the git CLI, a
// concurrent log buffer, a settable clock and the benchmarks' sizes.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServerBinary is where Debian's redis-server package installs the
// server; PATH is searched first.
const redisServerBinary = "/usr/bin/redis-server"

// redisStartAttempts bounds retries when another process takes the chosen
// port between picking it and the server binding it.
const redisStartAttempts = 3

// redisReadyTimeout bounds how long a started server may take to answer PING.
const redisReadyTimeout = 10 * time.Second

// Redis starts Debian's redis-server on a free loopback port, with no
// persistence and its working directory in t.TempDir(), and returns its
// address (host:port). The server is killed when the test ends. Under
// -short the test is skipped; a missing binary fails the test.
func Redis(t testing.TB) (addr string) {
	t.Helper()
	return startServer(t, false).Addr
}

// RedisClient returns a client for the server at addr, closed when the
// test ends.
func RedisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func findRedisServer() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat(redisServerBinary); err == nil {
		return redisServerBinary, nil
	}
	return "", errors.New("redis-server not found: install redis-server (apt-get install redis-server) or run .ci/run")
}

// RedisServer is a redis-server a test controls: it can be frozen, killed
// and started again on the same port with the same data, to probe what
// precept does when Redis misbehaves.
type RedisServer struct {
	// Addr is the server's host:port; it survives a restart.
	Addr string

	bin, dir string
	port     int
	persist  bool
	// args come after the defaults (a replica's --replicaof); conf, when
	// set, is a sentinel's configuration file, run with --sentinel.
	args []string
	conf string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    *redisOutput
}

// PersistentRedis starts a redis-server like Redis, but with an
// append-only file synced on every write, so that Kill and Restart lose
// nothing Redis acknowledged. The server is killed when the test ends.
func PersistentRedis(t testing.TB) *RedisServer {
	t.Helper()
	return startServer(t, true)
}

// startServer starts a redis-server on a free loopback port, retrying
// when another process takes the port first, and kills it when the test
// ends.
func startServer(t testing.TB, persist bool) *RedisServer {
	t.Helper()
	return startConfigured(t, persist, func(*RedisServer) {})
}

// startConfigured is startServer with configure run on the server before
// each start attempt, once its port is chosen.
func startConfigured(t testing.TB, persist bool, configure func(*RedisServer)) *RedisServer {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs redis-server")
	}
	bin, err := findRedisServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var lastErr error
	for range redisStartAttempts {
		port, err := pickRedisPort()
		if err != nil {
			t.Fatal(err)
		}
		s := &RedisServer{bin: bin, dir: dir, port: port, persist: persist, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		configure(s)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Kill)
			return s
		}
	}
	t.Fatalf("start redis-server: %v", lastErr)
	return nil
}

func (s *RedisServer) start() error {
	persistence := []string{"--save", "", "--appendonly", "no"}
	if s.persist {
		persistence = []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
	}
	out := &redisOutput{}
	args := append(persistence,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	if s.conf != "" {
		// A sentinel reads and rewrites its file; it has no persistence
		// options.
		args = []string{s.conf, "--sentinel", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--daemonize", "no", "--logfile", ""}
	}
	cmd := exec.Command(s.bin, append(args, s.args...)...)
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if err := waitForRedis(s.Addr, exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%w; server output:\n%s", err, out.String())
	}
	s.mu.Lock()
	s.cmd, s.exited, s.out = cmd, exited, out
	s.mu.Unlock()
	return nil
}

// Freeze stops the server process (SIGSTOP): connections stay open and
// nothing answers, as when a host stalls.
func (s *RedisServer) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *RedisServer) Thaw() { s.signal(syscall.SIGCONT) }

func (s *RedisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
	}
}

// Restart starts a killed server again on the same port and data
// directory.
func (s *RedisServer) Restart(t testing.TB) {
	t.Helper()
	var err error
	// The port was just released; another process rarely takes it.
	for range redisStartAttempts {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("restart redis-server on %s: %v", s.Addr, err)
}

// waitForRedis polls PING until the server answers, the process exits or
// the deadline passes.
func waitForRedis(addr string, exited <-chan struct{}) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	deadline := time.Now().Add(redisReadyTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited before answering PING", addr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %s: %w", addr, redisReadyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pickRedisPort asks the kernel for a free loopback port. Another process
// may take it before redis-server binds it; Redis retries then.
func pickRedisPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// redisOutput collects the server's output, which os/exec writes from its
// own goroutine while the test may read it.
type redisOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *redisOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *redisOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
