package embedding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// countingEmbedder counts the texts it embeds.
type countingEmbedder struct {
	Embedder
	mu    sync.Mutex
	texts []string
	short bool // return one vector too few
}

func (c *countingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	c.mu.Lock()
	c.texts = append(c.texts, texts...)
	c.mu.Unlock()
	vs, err := c.Embedder.Embed(ctx, texts)
	if c.short {
		vs = vs[1:]
	}
	return vs, err
}

func TestCacheEmbedsEachTextOnceWithinItsBound(t *testing.T) {
	ctx := context.Background()
	inner := &countingEmbedder{Embedder: NewLocal(LocalOptions{})}
	c := NewCache(inner, 4)
	if c.Name() != inner.Name() || c.Dimension() != inner.Dimension() {
		t.Errorf("cache is %s/%d, its embedder %s/%d", c.Name(), c.Dimension(), inner.Name(), inner.Dimension())
	}
	want, _ := inner.Embedder.Embed(ctx, []string{"missing tests", "flaky test", "no logging"})
	got, err := c.Embed(ctx, []string{"missing tests", "flaky test"})
	if err != nil {
		t.Fatal(err)
	}
	got2, err := c.Embed(ctx, []string{"flaky test", "no logging", "missing tests"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], want[0]) || !slices.Equal(got2[0], want[1]) || !slices.Equal(got2[1], want[2]) || !slices.Equal(got2[2], want[0]) {
		t.Error("cached vectors differ from the embedder's")
	}
	if g := strings.Join(inner.texts, "|"); g != "missing tests|flaky test|no logging" {
		t.Errorf("embedded %q, want each text once", g)
	}
	for i := range 20 {
		if _, err := c.Embed(ctx, []string{fmt.Sprint("text ", i)}); err != nil {
			t.Fatal(err)
		}
		if n := c.Len(); n > 4 {
			t.Fatalf("cache holds %d vectors, bound 4", n)
		}
	}
	// A text read again moves to the newer generation and stays.
	inner.texts = nil
	for i := range 10 {
		if _, err := c.Embed(ctx, []string{"kept", fmt.Sprint("other ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(strings.Join(inner.texts, "|"), "kept"); n != 1 {
		t.Errorf("a text used on every call was embedded %d times, want once", n)
	}
}

func TestCacheReportsAnEmbedderThatMissesTexts(t *testing.T) {
	c := NewCache(&countingEmbedder{Embedder: NewLocal(LocalOptions{}), short: true}, 10)
	if _, err := c.Embed(context.Background(), []string{"a text", "another"}); err == nil || !strings.Contains(err.Error(), "1 vectors for 2 texts") {
		t.Errorf("err = %v", err)
	}
	if c.Len() != 0 {
		t.Errorf("cache kept %d vectors of a failed call", c.Len())
	}
}

func TestCacheIsSafeForConcurrentUse(t *testing.T) {
	c := NewCache(NewLocal(LocalOptions{}), 8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if _, err := c.Embed(context.Background(), []string{fmt.Sprint(g, " ", i%10), "shared"}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 8 {
		t.Errorf("cache holds %d vectors, bound 8", n)
	}
}
