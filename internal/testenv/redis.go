// Package testenv starts the real servers precept's integration tests run
// against (docs/architecture.md, "Tests run against real servers"): each helper starts a fresh server on a free
// loopback port, waits until it answers and stops it when the test ends.
// Helpers skip under -short; when a server cannot be started they fail the
// test with what to install, never skip silently. The package also holds
// the small helpers several packages' tests share: the git CLI, a
// concurrent log buffer and a settable clock.
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
		addr, lastErr = startRedis(t, bin, dir)
		if lastErr == nil {
			return addr
		}
	}
	t.Fatalf("start redis-server: %v", lastErr)
	return ""
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

// startRedis makes one attempt to start a server; on failure the process
// is gone and the error carries the server's own output.
func startRedis(t testing.TB, bin, dir string) (string, error) {
	port, err := pickRedisPort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	out := &redisOutput{}
	cmd := exec.Command(bin,
		"--save", "",
		"--appendonly", "no",
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	if err := waitForRedis(addr, exited); err != nil {
		stop()
		return "", fmt.Errorf("%w; server output:\n%s", err, out.String())
	}
	t.Cleanup(stop)
	return addr, nil
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
