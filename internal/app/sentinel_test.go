package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lib/testenv"
)

// waitForReplica is what docs/operations.md ("Redis with Sentinel") asks
// of a producer: an entry counts as sent once WAIT says a replica has
// it; otherwise it is sent again (the decision id makes the second copy
// harmless).
func waitForReplica(rdb *redis.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		acked, err := rdb.Do(ctx, "WAIT", 1, 1000).Int64()
		if err == nil && acked < 1 {
			err = fmt.Errorf("no replica acknowledged")
		}
		return err
	}
}

// The Redis primary is killed while decisions arrive; Sentinel promotes
// the replica, preceptd follows it through redis.sentinel, the old
// primary comes back as a replica, and every decision is stored once:
// nothing lost, nothing committed twice, nothing left pending.
func TestAFailoverOfTheRedisPrimaryLosesNothingAndStoresNothingTwice(t *testing.T) {
	set := testenv.RedisWithSentinel(t)
	redisYAML := fmt.Sprintf("{sentinel: {master_name: %s, addrs: [%s]}, block: 100ms, claim_interval: 200ms, claim_idle: 1s}",
		testenv.SentinelMaster, strings.Join(set.SentinelAddrs(), ", "))
	r := launchWith(t, t.TempDir(), redisYAML, set.Client(t), "{batch_wait: 5ms, fsync: false}", "")
	const n = 300
	var sent atomic.Int64
	producer := set.Client(t)
	done := produceTo(producer, n, &sent, waitForReplica(producer))

	eventually(t, "a third sent", 30*time.Second, func() bool { return sent.Load() >= n/3 })
	set.Primary.Kill()
	ctx := context.Background()
	eventually(t, "the replica promoted", 30*time.Second, func() bool {
		m, err := set.Master(ctx)
		return err == nil && m == set.Replica.Addr
	})
	// The new primary has no replica, so WAIT 1 fails and the producer
	// keeps sending again, until the old primary is back and Sentinel
	// has made it a replica of the new one.
	set.Primary.Restart(t)
	<-done
	eventually(t, "every decision stored", 60*time.Second, func() bool { c, _ := r.app.Feedback.Count(); return c == n })
	eventually(t, "nothing pending", 30*time.Second, func() bool {
		p, err := r.rdb.XPending(ctx, decisions, "precept-evaluator").Result()
		return err == nil && p.Count == 0
	})
	for i := range n {
		if _, err := r.app.Feedback.Get(ctx, fmt.Sprintf("fault-%04d", i)); err != nil {
			t.Fatalf("fault-%04d: %v", i, err)
		}
	}
	files := testenv.Git(t, r.app.FeedbackRepo.Path(), "ls-tree", "-r", "--name-only", "main", feedbackstore.DecisionsDir)
	if got := len(strings.Fields(files)); got != n {
		t.Fatalf("%d decision files in git, want %d", got, n)
	}
	if dl, _ := r.rdb.XLen(ctx, decisions+":dlq").Result(); dl != 0 {
		t.Fatalf("%d entries dead-lettered", dl)
	}
	if code, body := readyz(t, r.app.URL()); code != http.StatusOK {
		t.Fatalf("readyz after the failover = %d %s", code, body)
	}
	if !strings.Contains(r.logs.String(), "Redis primary found through Sentinel") {
		t.Fatal("preceptd did not say it found the primary through Sentinel")
	}
	// The operator sees the failover: one change of primary, logged with
	// both addresses, and counted.
	eventually(t, "the failover counted", 10*time.Second, func() bool { return r.app.failovers.Failovers() == 1 })
	if want := "from=" + set.Primary.Addr + " to=" + set.Replica.Addr; !strings.Contains(r.logs.String(), want) {
		t.Fatalf("no log line says the primary changed (%s):\n%s", want, r.logs.String())
	}
	resp, err := http.Get(r.app.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "\nprecept_redis_failovers_total 1\n") {
		t.Fatalf("/metrics does not count one failover:\n%s", grepLines(string(body), "precept_redis_failovers_total"))
	}
}
