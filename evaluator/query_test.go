package evaluator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/embedding"
)

// labelledFeed is a feed holding the labelled fixture's decisions.
func labelledFeed(t testing.TB) *memFeed {
	t.Helper()
	feed := newFeed()
	for _, it := range loadFixture(t, "labelled.jsonl") {
		feed.add(it.Feedback)
	}
	return feed
}

// storedClusters is the reference for a listing: every stored cluster
// record that q selects, largest first, then by id.
func storedClusters(t *testing.T, s *Service, q ClusterQuery) []string {
	t.Helper()
	var picked []Cluster
	err := eachJSON(s.state, bClusters, func(c Cluster) error {
		if c.Size >= q.MinSize && (q.Agent == "" || c.Agents[q.Agent] > 0) {
			picked = append(picked, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(picked, func(i, j int) bool {
		if picked[i].Size != picked[j].Size {
			return picked[i].Size > picked[j].Size
		}
		return picked[i].ID < picked[j].ID
	})
	ids := make([]string, len(picked))
	for i, c := range picked {
		ids[i] = c.ID
	}
	return ids
}

// checkListings pages through Clusters for several queries and compares
// what it lists, and the totals it reports, with the stored records.
func checkListings(t *testing.T, s *Service) {
	t.Helper()
	ctx := context.Background()
	queries := []ClusterQuery{{}, {MinSize: 2}, {MinSize: 3}}
	for _, agent := range []string{"coding-agent", "docs-agent", "test-agent", "nobody"} {
		queries = append(queries, ClusterQuery{Agent: agent}, ClusterQuery{Agent: agent, MinSize: 2})
	}
	for _, q := range queries {
		want := storedClusters(t, s, q)
		for _, limit := range []int{0, 1, 4} {
			var got []string
			for offset := 0; ; offset += limit {
				q.Offset, q.Limit = offset, limit
				page, total, err := s.Clusters(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if total != len(want) {
					t.Fatalf("%+v: total %d, %d stored", q, total, len(want))
				}
				for _, v := range page {
					if v.Size < q.MinSize || (q.Agent != "" && v.Agents[q.Agent] == 0) {
						t.Fatalf("%+v listed cluster %s of size %d, agents %v", q, v.ID, v.Size, v.Agents)
					}
					stored, _, err := getJSON[Cluster](s.state, bClusters, v.ID)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(v.Stats, stored.Stats()) || !slices.Equal(v.Tags, stored.Tags()) || v.Class != stored.Class {
						t.Fatalf("cluster %s listed as %+v %v %s, stored as %+v %v %s", v.ID, v.Stats, v.Tags, v.Class, stored.Stats(), stored.Tags(), stored.Class)
					}
					got = append(got, v.ID)
				}
				if limit == 0 || len(page) < limit {
					break
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%+v, limit %d: listed %d clusters, %d stored", q, limit, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%+v, limit %d: position %d is %s, want %s\ngot  %v\nwant %v", q, limit, i, got[i], want[i], got, want)
				}
			}
		}
	}
	if page, _, _ := s.Clusters(ctx, ClusterQuery{Offset: 1 << 20, Limit: 5}); len(page) != 0 {
		t.Fatalf("past the end: %d clusters", len(page))
	}
}

// The listing sorts and counts the clusters held in memory and reads
// only its page: it must list what the state holds, in the same order,
// after clustering, after re-clustering passes, and after a restart.
func TestClusterListingsMatchTheStoredClusters(t *testing.T) {
	dir := t.TempDir()
	feed := labelledFeed(t)
	e := newEnv(t, dir, feed, Options{})
	e.drain(t)
	checkListings(t, e.svc)
	if _, err := e.svc.ReclusterAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkListings(t, e.svc)
	e.close()

	e = newEnv(t, dir, feed, Options{})
	defer e.close()
	checkListings(t, e.svc)
}

// openRecords is the reference for a needs-review listing: every stored
// record of agent that is not resolved, oldest update first, then by id.
func openRecords(t *testing.T, s *Service, agent string) []string {
	t.Helper()
	var open []NeedsReview
	err := eachJSON(s.state, bReview, func(r NeedsReview) error {
		if (agent == "" || r.Agent == agent) && r.Status != Resolved {
			open = append(open, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(open, func(i, j int) bool {
		if !open[i].UpdatedAt.Equal(open[j].UpdatedAt) {
			return open[i].UpdatedAt.Before(open[j].UpdatedAt)
		}
		return open[i].DecisionID < open[j].DecisionID
	})
	ids := make([]string, len(open))
	for i, r := range open {
		ids[i] = r.DecisionID
	}
	return ids
}

// checkReviewListings pages through NeedsReview for every agent and
// compares it with the stored records.
func checkReviewListings(t *testing.T, s *Service, wantOpen int) {
	t.Helper()
	if got := len(openRecords(t, s, "")); got != wantOpen {
		t.Fatalf("%d records open, the test expects %d", got, wantOpen)
	}
	for _, agent := range []string{"", "agent-0", "agent-1", "agent-2", "nobody"} {
		want := openRecords(t, s, agent)
		for _, limit := range []int{0, 1, 3} {
			var got []string
			for offset := 0; ; offset += limit {
				page, total, err := s.NeedsReview(context.Background(), ReviewQuery{Agent: agent, Offset: offset, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				if total != len(want) {
					t.Fatalf("agent %q: total %d, %d open", agent, total, len(want))
				}
				for _, r := range page {
					got = append(got, r.DecisionID)
				}
				if limit == 0 || len(page) < limit {
					break
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("agent %q, limit %d:\ngot  %v\nwant %v", agent, limit, got, want)
			}
		}
	}
}

// The needs-review listing sorts an index in memory and reads only its
// page: it must list the open records as stored, in order, as records
// are added and resolved, and after a restart.
func TestNeedsReviewListingsMatchTheOpenRecords(t *testing.T) {
	dir := t.TempDir()
	feed := newFeed()
	clock := t0
	opts := Options{Now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	vague := []string{"fix this", "redo it", "no", "wrong again", "not like this", "try again"}
	for i := range 12 {
		fb := neg(fmt.Sprintf("v%02d", i), "vic", "E1", vague[i%len(vague)])
		fb.Agent = fmt.Sprintf("agent-%d", i%3)
		feed.add(fb)
	}
	e := newEnv(t, dir, feed, Options{BatchSize: 5, Now: opts.Now})
	e.drain(t)
	checkReviewListings(t, e.svc, 12)

	// A clear reply resolves v04; a vague one updates v07, which moves
	// to the end of the order.
	feed.addConversation(Conversation{DecisionID: "v04", Status: PendingClarification, Replies: []ConversationReply{
		{Text: "The retry loop has no timeout and hangs forever; set a timeout on the HTTP client in client.go."}}})
	feed.addConversation(Conversation{DecisionID: "v07", Status: PendingClarification, Replies: []ConversationReply{{Text: "redo it please", At: t0.Add(time.Hour)}}})
	e.drain(t)
	if r, _ := e.svc.Review(context.Background(), "v04"); r.Status != Resolved {
		t.Fatalf("v04 = %+v, want resolved", r)
	}
	if ids := openRecords(t, e.svc, ""); ids[len(ids)-1] != "v07" {
		t.Fatalf("v07 was not updated last: %v", ids)
	}
	checkReviewListings(t, e.svc, 11)
	e.close()

	e = newEnv(t, dir, feed, opts)
	defer e.close()
	checkReviewListings(t, e.svc, 11)
}

// A page of a cluster's members is that stretch of the whole list, in
// join order, whatever the page's size and position.
func TestClusterPageReadsAStretchOfTheMembers(t *testing.T) {
	e := newEnv(t, t.TempDir(), labelledFeed(t), Options{})
	defer e.close()
	e.drain(t)
	ctx := context.Background()
	largest, _, err := e.svc.Clusters(ctx, ClusterQuery{Limit: 1})
	if err != nil || len(largest) != 1 || largest[0].Size < 5 {
		t.Fatalf("largest cluster = %+v, %v", largest, err)
	}
	id := largest[0].ID
	whole, err := e.svc.Cluster(ctx, id)
	if err != nil || len(whole.Members) != whole.Size {
		t.Fatalf("cluster %s: %d members of %d, %v", id, len(whole.Members), whole.Size, err)
	}
	ids := func(ms []Member) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.DecisionID
		}
		return out
	}
	all := ids(whole.Members)
	for _, tc := range []struct{ offset, limit int }{{0, 1}, {0, 2}, {1, 2}, {2, 3}, {whole.Size - 1, 5}, {whole.Size, 5}, {whole.Size + 3, 1}, {3, 0}, {-1, 2}} {
		page, err := e.svc.ClusterPage(ctx, id, tc.offset, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		from := min(max(tc.offset, 0), len(all))
		to := len(all)
		if tc.limit > 0 {
			to = min(from+tc.limit, len(all))
		}
		if got, want := ids(page.Members), all[from:to]; !slices.Equal(got, want) {
			t.Errorf("offset %d, limit %d: %v, want %v", tc.offset, tc.limit, got, want)
		}
		if page.Size != whole.Size || page.Stats.Size != whole.Size {
			t.Errorf("offset %d, limit %d: size %d", tc.offset, tc.limit, page.Size)
		}
	}
}

// The index of open records against a plain model, through random
// writes: new records, updates to later, earlier and repeated times,
// resolutions, and enough of them to compact the order.
func TestOpenReviewIndexAgreesWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var o openReviews
	o.m, o.perAgent = map[string]reviewHead{}, map[string]int{}
	model := map[string]NeedsReview{}
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for step := range 400 {
		var batch []NeedsReview
		for range 1 + rng.IntN(20) {
			r := NeedsReview{DecisionID: fmt.Sprintf("d%03d", rng.IntN(300)), Agent: fmt.Sprintf("a%d", rng.IntN(3)),
				Status: PendingClarification, UpdatedAt: t0.Add(time.Duration(rng.IntN(50)) * time.Minute)}
			if old, ok := model[r.DecisionID]; ok {
				r.Agent = old.Agent
			}
			if rng.IntN(4) == 0 {
				r.Status = Resolved
			}
			batch = append(batch, r)
		}
		o.written(batch)
		for _, r := range batch {
			if r.Status == Resolved {
				delete(model, r.DecisionID)
			} else {
				model[r.DecisionID] = r
			}
		}
		if step%20 != 0 {
			continue
		}
		for _, agent := range []string{"", "a0", "a1", "a2"} {
			var want []NeedsReview
			for _, r := range model {
				if agent == "" || r.Agent == agent {
					want = append(want, r)
				}
			}
			sort.Slice(want, func(i, j int) bool {
				if !want[i].UpdatedAt.Equal(want[j].UpdatedAt) {
					return want[i].UpdatedAt.Before(want[j].UpdatedAt)
				}
				return want[i].DecisionID < want[j].DecisionID
			})
			for _, pg := range [][2]int{{0, 0}, {0, 7}, {5, 3}, {len(want) - 1, 10}, {len(want) + 4, 2}} {
				ids, total := o.page(agent, max(pg[0], 0), pg[1])
				from := min(max(pg[0], 0), len(want))
				to := len(want)
				if pg[1] > 0 {
					to = min(from+pg[1], len(want))
				}
				var wantIDs []string
				for _, r := range want[from:to] {
					wantIDs = append(wantIDs, r.DecisionID)
				}
				if total != len(want) || !slices.Equal(ids, wantIDs) {
					t.Fatalf("step %d, agent %q, page %v: %v of %d, want %v of %d", step, agent, pg, ids, total, wantIDs, len(want))
				}
			}
		}
	}
}

func TestCentralityIsTheMeanSimilarityToTheOthers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{0, 1, 2, 5, 64} {
		vecs := make([][]float32, n)
		for i := range vecs {
			vecs[i] = make([]float32, 48)
			for d := range vecs[i] {
				vecs[i][d] = float32(rng.NormFloat64())
			}
			// Some vectors not at unit length, as a remote index may
			// return them, and one zero vector.
			if i%3 == 1 {
				for d := range vecs[i] {
					vecs[i][d] *= 7
				}
			}
		}
		if n > 4 {
			clear(vecs[4])
		}
		got := centralities(vecs)
		for i := range vecs {
			want := 1.0
			if n > 1 {
				var sum float64
				for j := range vecs {
					if i != j {
						sum += embedding.Cosine(vecs[i], vecs[j])
					}
				}
				want = sum / float64(n-1)
			}
			if math.Abs(got[i]-want) > 1e-9 {
				t.Fatalf("n=%d: centrality of %d = %v, pairwise mean %v", n, i, got[i], want)
			}
		}
	}
}
