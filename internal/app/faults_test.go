package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/lib/testenv"
)

const decisions = "asdlc:events:hitl_decisions"

// smallFilesystem mounts a tmpfs of size bytes for the test. Mounting
// needs root: without it the test is skipped, loudly.
func smallFilesystem(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: mounting a small tmpfs to fill the disk needs root; run the tests as root (CI does) to probe a full filesystem")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	})
	return dir
}

// fill writes a file until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	// Whatever is left is smaller than a chunk: take that too.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			return p
		}
	}
}

func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestFullFilesystemIsNotReadyAndLosesNothing(t *testing.T) {
	dir := smallFilesystem(t, 16<<20)
	r := launch(t, filepath.Join(dir, "data"), testenv.Redis(t), "{batch_wait: 5ms, fsync: true}", "")
	ctx := context.Background()
	for i := range 20 {
		r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: decisions, Values: event(fmt.Sprintf("before-%d", i))})
	}
	eventually(t, "the first decisions stored", 10*time.Second, func() bool { n, _ := r.app.Feedback.Count(); return n == 20 })
	if code, body := readyz(t, r.app.URL()); code != http.StatusOK {
		t.Fatalf("readyz before the disk fills = %d %s", code, body)
	}

	filler := fill(t, dir)
	for i := range 50 {
		r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: decisions, Values: event(fmt.Sprintf("full-%d", i))})
	}
	eventually(t, "readyz to report the full disk", 10*time.Second, func() bool {
		code, _ := readyz(t, r.app.URL())
		return code == http.StatusServiceUnavailable
	})
	_, body := readyz(t, r.app.URL())
	t.Logf("readyz on a full disk: %s", body)
	// Give the consumer time to try and fail: nothing may be acknowledged.
	time.Sleep(500 * time.Millisecond)
	if n, _ := r.app.Feedback.Count(); n != 20 {
		t.Fatalf("stored %d decisions on a full disk", n)
	}
	if p, err := r.rdb.XPending(ctx, decisions, "precept-evaluator").Result(); err != nil || p.Count == 0 {
		t.Fatalf("pending = %+v, %v: entries were acknowledged without being stored", p, err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every decision stored once the disk has room", 30*time.Second, func() bool { n, _ := r.app.Feedback.Count(); return n == 70 })
	eventually(t, "readyz ready again", 10*time.Second, func() bool {
		code, _ := readyz(t, r.app.URL())
		return code == http.StatusOK
	})
	eventually(t, "nothing pending", 10*time.Second, func() bool {
		p, err := r.rdb.XPending(ctx, decisions, "precept-evaluator").Result()
		return err == nil && p.Count == 0
	})
	if dl, _ := r.rdb.XLen(ctx, decisions+":dlq").Result(); dl != 0 {
		t.Fatalf("%d entries dead-lettered", dl)
	}
	// git fsck lists packs once: a commit made while it runs (the evaluator
	// documents edge cases after the decisions) would look missing.
	r.stop()
	out, err := exec.Command("git", "-C", r.app.FeedbackRepo.Path(), "fsck", "--strict", "--no-dangling").CombinedOutput()
	if err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
}

// produce XADDs n decisions, 5 ms apart, retrying each until Redis takes
// it, and reports progress on sent.
func produce(t *testing.T, addr string, n int, sent *atomic.Int64) <-chan struct{} {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	return produceTo(rdb, n, sent, nil)
}

// produceTo sends decisions fault-0000 … to rdb one at a time, each
// again until its XADD, and then confirm when not nil, succeeds.
func produceTo(rdb *redis.Client, n int, sent *atomic.Int64, confirm func(context.Context) error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		for i := range n {
			for {
				err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: decisions, Values: event(fmt.Sprintf("fault-%04d", i))}).Err()
				if err == nil && confirm != nil {
					err = confirm(ctx)
				}
				if err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			sent.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return done
}

func TestRedisFrozenAndRestartedDuringIngestionLosesNothing(t *testing.T) {
	srv := testenv.PersistentRedis(t)
	r := launch(t, t.TempDir(), srv.Addr, "{batch_wait: 5ms, fsync: false}", "")
	const n = 300
	var sent atomic.Int64
	done := produce(t, srv.Addr, n, &sent)

	eventually(t, "a third sent", 30*time.Second, func() bool { return sent.Load() >= n/3 })
	srv.Freeze()
	eventually(t, "readyz to report the frozen Redis", 10*time.Second, func() bool {
		code, _ := readyz(t, r.app.URL())
		return code == http.StatusServiceUnavailable
	})
	time.Sleep(2 * time.Second)
	srv.Thaw()

	eventually(t, "two thirds sent", 60*time.Second, func() bool { return sent.Load() >= 2*n/3 })
	srv.Kill()
	eventually(t, "readyz to report the stopped Redis", 10*time.Second, func() bool {
		code, _ := readyz(t, r.app.URL())
		return code == http.StatusServiceUnavailable
	})
	time.Sleep(time.Second)
	srv.Restart(t)

	<-done
	eventually(t, "every decision stored", 60*time.Second, func() bool { c, _ := r.app.Feedback.Count(); return c == n })
	rdb := testenv.RedisClient(t, srv.Addr)
	ctx := context.Background()
	eventually(t, "nothing pending", 30*time.Second, func() bool {
		p, err := rdb.XPending(ctx, decisions, "precept-evaluator").Result()
		return err == nil && p.Count == 0
	})
	if dl, _ := rdb.XLen(ctx, decisions+":dlq").Result(); dl != 0 {
		t.Fatalf("%d entries dead-lettered", dl)
	}
	for i := range n {
		if _, err := r.app.Feedback.Get(ctx, fmt.Sprintf("fault-%04d", i)); err != nil {
			t.Fatalf("fault-%04d: %v", i, err)
		}
	}
	if code, body := readyz(t, r.app.URL()); code != http.StatusOK {
		t.Fatalf("readyz after Redis came back = %d %s", code, body)
	}
}
