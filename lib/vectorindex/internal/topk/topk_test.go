package topk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// shuffledSearch is a backend that returns the true top n by similarity
// but breaks ties at random, both in order and in which tied hits make the
// cut, and records the n it was asked for.
type shuffledSearch struct {
	all   []vectorindex.Hit
	rng   *rand.Rand
	asked []int
}

func (s *shuffledSearch) search(_ context.Context, n int) ([]vectorindex.Hit, error) {
	s.asked = append(s.asked, n)
	hits := slices.Clone(s.all)
	s.rng.Shuffle(len(hits), func(i, j int) { hits[i], hits[j] = hits[j], hits[i] })
	slices.SortStableFunc(hits, func(a, b vectorindex.Hit) int {
		switch {
		case a.Similarity > b.Similarity:
			return -1
		case a.Similarity < b.Similarity:
			return 1
		}
		return 0
	})
	if len(hits) > n {
		hits = hits[:n]
	}
	return hits, nil
}

func hits(pairs ...any) []vectorindex.Hit {
	var out []vectorindex.Hit
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, vectorindex.Hit{ID: pairs[i].(string), Similarity: pairs[i+1].(float64)})
	}
	return out
}

func ids(hs []vectorindex.Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

func TestSelectIsDeterministicWhenTiesStraddleTheLimit(t *testing.T) {
	tests := []struct {
		name     string
		all      []vectorindex.Hit
		limit    int
		minSim   float64
		want     []string
		maxAsked int
	}{
		{
			name:  "no ties asks once for limit+1",
			all:   hits("a", 0.9, "b", 0.8, "c", 0.7, "d", 0.6),
			limit: 2, want: []string{"a", "b"}, maxAsked: 3,
		},
		{
			name:  "tie across the limit is resolved by ID",
			all:   hits("e", 0.5, "c", 0.5, "a", 0.5, "d", 0.5, "b", 0.5, "z", 0.9, "y", 0.1),
			limit: 3, want: []string{"z", "a", "b"}, maxAsked: 7,
		},
		{
			name:  "everything tied",
			all:   hits("e", 0.5, "c", 0.5, "a", 0.5, "d", 0.5, "b", 0.5),
			limit: 2, want: []string{"a", "b"}, maxAsked: 5,
		},
		{
			name:  "tie below the minimum is not expanded",
			all:   hits("a", 0.9, "e", 0.1, "c", 0.1, "b", 0.1, "d", 0.1),
			limit: 2, minSim: 0.5, want: []string{"a"}, maxAsked: 3,
		},
		{
			name:  "minimum similarity cuts inside the limit",
			all:   hits("a", 0.9, "b", 0.81, "c", 0.79, "d", 0.2),
			limit: 10, minSim: 0.8, want: []string{"a", "b"}, maxAsked: 4,
		},
		{
			name:  "a hit exactly at the minimum is kept",
			all:   hits("a", 0.8, "b", 0.7),
			limit: 10, minSim: 0.8, want: []string{"a"}, maxAsked: 2,
		},
		{
			name:  "fewer stored than the limit",
			all:   hits("b", 0.3, "a", 0.3),
			limit: 10, want: []string{"a", "b"}, maxAsked: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Random tie-breaking must never change the answer.
			for seed := range uint64(20) {
				s := &shuffledSearch{all: tt.all, rng: rand.New(rand.NewPCG(seed, 7))}
				got, err := Select(context.Background(), tt.limit, len(tt.all), tt.minSim, s.search)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids(got), tt.want) {
					t.Fatalf("seed %d: got %v, want %v", seed, ids(got), tt.want)
				}
				for _, n := range s.asked {
					if n > tt.maxAsked || n > len(tt.all) {
						t.Fatalf("seed %d: asked for %d hits, want ≤ %d and ≤ %d stored", seed, n, tt.maxAsked, len(tt.all))
					}
				}
			}
		})
	}
}

func TestSelectReturnsSearchErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := Select(context.Background(), 3, 10, 0, func(context.Context, int) ([]vectorindex.Hit, error) {
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func TestSelectOnEmptyIndexDoesNotSearch(t *testing.T) {
	got, err := Select(context.Background(), 3, 0, 0, func(context.Context, int) ([]vectorindex.Hit, error) {
		return nil, fmt.Errorf("searched an empty index")
	})
	if err != nil || got != nil {
		t.Fatalf("got %v, %v; want nil, nil", got, err)
	}
}
