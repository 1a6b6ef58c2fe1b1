package feedbackstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
)

// BenchmarkOneBranch measures what one branch of a git server takes when
// nodes store decisions through it, with nothing else running (no Redis,
// no evaluation): one store, then three, each in a data directory of its
// own, store batches of 500 decisions (feedback.batch_size's default)
// through one git http-backend, two batches in flight per store
// (redis.max_in_flight's default), as fast as the server takes them.
// Three stores' rate is what the one branch takes from three nodes on
// this machine; against one store's it says what contention costs.
// Three stores each on a branch of its own (a repository of its own on
// the same server) bound what per-node branches could reach here
// (docs/decisions/0019-evaluation-across-nodes.md).
func BenchmarkOneBranch(b *testing.B) {
	const batch = 500
	n := max(batch*6, testenv.BenchSize(b, 60000)/(batch*6)*(batch*6))
	srv := testenv.StartGitServer(b)
	ctx := context.Background()
	for range b.N {
		rates := map[string]float64{}
		for _, c := range []struct {
			writers  int
			branches int
		}{{1, 1}, {3, 1}, {3, 3}} {
			writers := c.writers
			label := fmt.Sprintf("%dstores", writers)
			if c.branches > 1 {
				label += fmt.Sprintf("-%dbranches", c.branches)
			}
			name := fmt.Sprintf("branch-%s-%d", label, time.Now().UnixNano())
			var stores []*fixture
			for i := range writers {
				// Each store on a branch of its own is what per-node
				// branches could at best reach: no refused push, and no
				// merge of the branches into one order.
				repo := fmt.Sprintf("%s-%d", name, i%c.branches)
				if i < c.branches {
					testenv.Git(b, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir(repo))
				}
				stores = append(stores, openRemote(b, srv.URL(repo), gitrepo.Auth{}))
			}
			batches := make(chan []precept.Feedback, n/batch)
			for i := 0; i < n; i += batch {
				recs := make([]precept.Feedback, 0, batch)
				for k := range batch {
					recs = append(recs, decision(fmt.Sprintf("%s-%07d", name, i+k), "coder", t0))
				}
				batches <- recs
			}
			close(batches)
			var gaveUp atomic.Int64
			start := time.Now()
			var wg sync.WaitGroup
			for _, s := range stores {
				for range 2 {
					wg.Go(func() {
						for recs := range batches {
							// A write that gave up (feedbackstore.RemoteTimeout)
							// is sent again, as the stream would deliver its
							// entries again in preceptd.
							for {
								_, err := s.store.Store(ctx, recs)
								if err == nil {
									break
								}
								if gaveUp.Add(1) > 20 {
									b.Error(err)
									return
								}
								b.Logf("%d store(s): a write gave up and is sent again: %v", writers, err)
							}
						}
					})
				}
			}
			wg.Wait()
			took := time.Since(start)
			var pushes, refused uint64
			for _, s := range stores {
				st, err := s.repo.Stats()
				if err != nil {
					b.Fatal(err)
				}
				pushes, refused = pushes+st.Writes.Pushes, refused+st.Writes.PushesRejected
			}
			stored := 0
			for i := range c.branches {
				out := testenv.Git(b, srv.Root, "--git-dir", srv.Dir(fmt.Sprintf("%s-%d", name, i)), "ls-tree", "-r", "--name-only", "main", DecisionsDir)
				stored += strings.Count(out, ".json")
			}
			if stored != n {
				b.Fatalf("%s: the server holds %d decisions, %d were stored", label, stored, n)
			}
			rates[label] = float64(n) / took.Seconds()
			b.Logf("%d store(s) on %d branch(es): %d decisions in %.2f s, %.0f/s; %d pushes taken, %d refused (another store pushed first); %d writes gave up after %s and were sent again",
				writers, c.branches, n, took.Seconds(), rates[label], pushes, refused, gaveUp.Load(), RemoteTimeout)
			b.ReportMetric(float64(gaveUp.Load()), "gave-up-"+label)
			b.ReportMetric(rates[label], "decisions/s-"+label)
			b.ReportMetric(float64(refused)/float64(max(1, pushes)), "refused-per-push-"+label)
		}
		b.ReportMetric(rates["3stores"]/rates["1stores"], "ratio-3to1")
		b.ReportMetric(rates["3stores-3branches"]/rates["1stores"], "ratio-3branches-to-1")
	}
}
