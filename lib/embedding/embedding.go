package embedding

import (
	"context"
	"math"
)

// Embedder turns texts into vectors. Vectors are L2-normalised, so cosine
// similarity is the dot product. A text with nothing to embed (empty, or
// only punctuation) yields the zero vector.
type Embedder interface {
	// Name identifies the model and every setting that changes vectors,
	// e.g. "local-ngram-v1-384". It is stored with an index; a different
	// name means the index must be rebuilt.
	Name() string
	// Dimension is the length of every vector Embed returns.
	Dimension() int
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// Cosine returns the cosine similarity of a and b, in [-1, 1]. It returns
// 0 when the lengths differ or either vector is zero, so a text with
// nothing to embed is similar to nothing.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		// The explicit conversions keep the compiler from fusing the
		// multiply-adds, so every platform rounds the same way.
		dot += float64(x * y)
		na += float64(x * x)
		nb += float64(y * y)
	}
	if na == 0 || nb == 0 {
		return 0
	}
	c := dot / (math.Sqrt(na) * math.Sqrt(nb))
	return max(-1, min(1, c))
}
