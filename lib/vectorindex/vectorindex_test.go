package vectorindex

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

var spec = Spec{Embedder: "test-v1", Dimension: 3}

func TestSpecValidate(t *testing.T) {
	tests := []struct {
		spec Spec
		ok   bool
	}{
		{Spec{Embedder: "local-ngram-v1", Dimension: 384}, true},
		{Spec{Embedder: "e", Dimension: MaxDimension}, true},
		{Spec{Embedder: "", Dimension: 384}, false},
		{Spec{Embedder: "  ", Dimension: 384}, false},
		{Spec{Embedder: "\xff", Dimension: 384}, false},
		{Spec{Embedder: "e", Dimension: 0}, false},
		{Spec{Embedder: "e", Dimension: -3}, false},
		{Spec{Embedder: "e", Dimension: MaxDimension + 1}, false},
	}
	for _, tt := range tests {
		err := tt.spec.Validate()
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%v.Validate() = %v, want ok=%v (ErrInvalid otherwise)", tt.spec, err, tt.ok)
		}
	}
}

func TestVectorValidate(t *testing.T) {
	tests := []struct {
		name string
		v    Vector
		want error
	}{
		{"valid", Vector{ID: "a", Embedding: []float32{1, 0, 0}, Metadata: map[string]string{"agent": "coder"}}, nil},
		{"unnormalised is fine", Vector{ID: "a", Embedding: []float32{3, 4, 0}}, nil},
		{"short", Vector{ID: "a", Embedding: []float32{1, 0}}, ErrDimension},
		{"long", Vector{ID: "a", Embedding: []float32{1, 0, 0, 0}}, ErrDimension},
		{"empty embedding", Vector{ID: "a"}, ErrDimension},
		{"empty ID", Vector{Embedding: []float32{1, 0, 0}}, ErrInvalid},
		{"NaN", Vector{ID: "a", Embedding: []float32{float32(math.NaN()), 0, 0}}, ErrInvalid},
		{"-Inf", Vector{ID: "a", Embedding: []float32{float32(math.Inf(-1)), 0, 0}}, ErrInvalid},
		{"zero", Vector{ID: "a", Embedding: []float32{0, 0, 0}}, ErrInvalid},
		{"reserved key", Vector{ID: "a", Embedding: []float32{1, 0, 0}, Metadata: map[string]string{"chroma:document": "x"}}, ErrInvalid},
		{"operator key", Vector{ID: "a", Embedding: []float32{1, 0, 0}, Metadata: map[string]string{"$in": "x"}}, ErrInvalid},
		{"hash key", Vector{ID: "a", Embedding: []float32{1, 0, 0}, Metadata: map[string]string{"#document": "x"}}, ErrInvalid},
		{"bad UTF-8 value", Vector{ID: "a", Embedding: []float32{1, 0, 0}, Metadata: map[string]string{"k": "\xc3"}}, ErrInvalid},
		{"bad UTF-8 document", Vector{ID: "a", Embedding: []float32{1, 0, 0}, Document: "\xc3"}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.Validate(spec)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestQueryValidate(t *testing.T) {
	e := []float32{0, 1, 0}
	tests := []struct {
		name string
		q    Query
		want error
	}{
		{"valid", Query{Embedding: e, Limit: 10, MinSimilarity: 0.8, Where: map[string]string{"agent": "coder"}}, nil},
		{"no limit", Query{Embedding: e}, ErrInvalid},
		{"NaN minimum", Query{Embedding: e, Limit: 1, MinSimilarity: math.NaN()}, ErrInvalid},
		{"wrong dimension", Query{Embedding: e[:2], Limit: 1}, ErrDimension},
		{"empty filter value", Query{Embedding: e, Limit: 1, Where: map[string]string{"agent": ""}}, ErrInvalid},
		{"reserved filter key", Query{Embedding: e, Limit: 1, Where: map[string]string{"$and": "x"}}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate(spec)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Validate = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestPrepareUpsertKeepsTheLastVectorPerIDInFirstSeenOrder(t *testing.T) {
	in := []Vector{
		{ID: "b", Embedding: []float32{1, 0, 0}, Document: "b1"},
		{ID: "a", Embedding: []float32{0, 1, 0}, Document: "a1"},
		{ID: "b", Embedding: []float32{0, 0, 1}, Document: "b2"},
	}
	got, err := PrepareUpsert(context.Background(), spec, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "b" || got[0].Document != "b2" || got[1].ID != "a" {
		t.Fatalf("got %+v, want b (b2) then a", got)
	}
}

func TestPrepareUpsertRejectsTheWholeBatchForOneBadVector(t *testing.T) {
	in := []Vector{{ID: "ok", Embedding: []float32{1, 0, 0}}, {ID: "bad", Embedding: []float32{1, 0}}}
	got, err := PrepareUpsert(context.Background(), spec, in)
	if !errors.Is(err, ErrDimension) || got != nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("got %v, %v; want nil and ErrDimension naming the vector", got, err)
	}
}

func TestPrepareDelete(t *testing.T) {
	got, err := PrepareDelete(context.Background(), []string{"a", "b", "a"})
	if err != nil || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("got %v, %v; want [a b]", got, err)
	}
	if _, err := PrepareDelete(context.Background(), []string{"a", ""}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty ID: %v, want ErrInvalid", err)
	}
}

func TestClampSimilarity(t *testing.T) {
	for in, want := range map[float64]float64{1.0000001: 1, -1.0000001: -1, 0.5: 0.5} {
		if got := ClampSimilarity(in); got != want {
			t.Errorf("ClampSimilarity(%v) = %v, want %v", in, got, want)
		}
	}
}
