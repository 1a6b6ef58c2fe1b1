package feedbackstore

import (
	"context"
	"fmt"
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
// this machine; against one store's it says what contention costs
// (docs/decisions/0019-evaluation-across-nodes.md).
func BenchmarkOneBranch(b *testing.B) {
	const batch = 500
	n := max(batch*6, testenv.BenchSize(b, 60000)/(batch*6)*(batch*6))
	srv := testenv.StartGitServer(b)
	ctx := context.Background()
	for range b.N {
		rates := map[int]float64{}
		for _, writers := range []int{1, 3} {
			name := fmt.Sprintf("branch-%d-%d", writers, time.Now().UnixNano())
			testenv.Git(b, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir(name))
			var stores []*fixture
			for range writers {
				stores = append(stores, openRemote(b, srv.URL(name), gitrepo.Auth{}))
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
			rates[writers] = float64(n) / took.Seconds()
			b.Logf("%d store(s): %d decisions through one branch in %.2f s, %.0f/s; %d pushes taken, %d refused (another store pushed first); %d writes gave up after %s and were sent again",
				writers, n, took.Seconds(), rates[writers], pushes, refused, gaveUp.Load(), RemoteTimeout)
			b.ReportMetric(float64(gaveUp.Load()), fmt.Sprintf("gave-up-%dstores", writers))
			b.ReportMetric(rates[writers], fmt.Sprintf("decisions/s-%dstores", writers))
			b.ReportMetric(float64(refused)/float64(max(1, pushes)), fmt.Sprintf("refused-per-push-%dstores", writers))
		}
		b.ReportMetric(rates[3]/rates[1], "ratio-3to1")
	}
}
