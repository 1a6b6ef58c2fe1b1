package evaluator

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/precept-dev/precept/lesson"
)

// Clusters are grouped by agent and family: a category and its
// neighbours (lesson.Taxonomy.Family). Within a group, the similarity of
// two lessons is the cosine of their embeddings, less a penalty for the
// part of their category weights they do not share:
//
//	sim(a, b) = cos(a, b) − categoryWeight·(1 − wa·wb)
//
// Two lessons of one category alone are compared by their embeddings as
// before; lessons of neighbouring categories join only when they are
// similar enough to pay for the categories they do not share. The
// penalty is linear in the weights, so a cluster's mean similarity still
// comes from sums and average linkage stays exact (docs/lessons.md,
// "Clustering"; the weight is chosen in docs/thresholds.md).
const categoryWeight = 0.3

// weights are a member's category weights; a member stored before they
// were kept counts as its cluster's category alone.
func (m Member) weights(category string) map[string]float64 {
	if len(m.Categories) > 0 {
		return m.Categories
	}
	if category == "" {
		return nil
	}
	return map[string]float64{category: 1}
}

// categorySum is the cluster's sum of its members' weights; a cluster
// stored before weights were kept holds its category Size times.
func (c *Cluster) categorySum() map[string]float64 {
	if c.CategorySum != nil || c.Size == 0 || c.Category == "" {
		return c.CategorySum
	}
	return map[string]float64{c.Category: float64(c.Size)}
}

// addWeights adds w into sum, allocating it when nil.
func addWeights(sum, w map[string]float64) map[string]float64 {
	if len(w) == 0 {
		return sum
	}
	if sum == nil {
		sum = make(map[string]float64, len(w))
	}
	for k, x := range w {
		sum[k] += x
	}
	return sum
}

// dotWeights is the dot product of two weight maps.
func dotWeights(a, b map[string]float64) float64 {
	if len(b) < len(a) {
		a, b = b, a
	}
	if len(a) == 1 {
		// The common case, without allocating: a lesson of a category
		// with no neighbouring alternatives.
		for k, x := range a {
			return x * b[k]
		}
	}
	// Summed in key order, so every replica rounds alike; a lesson names
	// at most a few categories, so the keys sort on the stack.
	var buf [8]string
	keys := buf[:0]
	for k := range a {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var s float64
	for _, k := range keys {
		s += a[k] * b[k]
	}
	return s
}

// inFamily returns w without the categories outside family f of tax, as
// after a taxonomy change split a family; w itself when nothing is left
// out.
func inFamily(w map[string]float64, tax *lesson.Taxonomy, f string) map[string]float64 {
	var out map[string]float64
	for k := range w {
		if tax.Family(k) != f {
			out = maps.Clone(w)
			break
		}
	}
	if out == nil {
		return w
	}
	maps.DeleteFunc(out, func(k string, _ float64) bool { return tax.Family(k) != f })
	return out
}

// linkageSimilarity is the mean similarity of a lesson (unit vector v,
// weights w) to a cluster's members, from the cluster's sums.
func linkageSimilarity(v []float32, w map[string]float64, sum []float32, catSum map[string]float64, size int) float64 {
	if size == 0 {
		return -1
	}
	return meanSimilarity(v, sum, size) - categoryWeight*(1-dotWeights(w, catSum)/float64(size))
}

// leadingCategory is the category a set of weights favours: the largest
// sum, ties to the smaller id.
func leadingCategory(sum map[string]float64) string {
	best, bestW := "", math.Inf(-1)
	for _, k := range slices.Sorted(maps.Keys(sum)) {
		// Rounded, so float noise in the sums never decides a tie.
		if w := math.Round(sum[k]*1e6) / 1e6; w > bestW {
			best, bestW = k, w
		}
	}
	return best
}

// addAugmented adds a member's vector to sum, followed by its weights as
// extra dimensions (one per category of the group, in the order of
// cats), scaled so that the dot product of two augmented vectors is
// cos + categoryWeight·wa·wb.
func addAugmented(sum, v []float32, w map[string]float64, cats []string) {
	for d, x := range v {
		sum[d] += x
	}
	scale := math.Sqrt(categoryWeight)
	for i, k := range cats {
		sum[len(v)+i] += float32(scale * w[k])
	}
}

// groupCategories are the categories the members' weights name, sorted.
func groupCategories(ws []map[string]float64) []string {
	set := map[string]bool{}
	for _, w := range ws {
		for k := range w {
			set[k] = true
		}
	}
	return slices.SortedFunc(maps.Keys(set), cmp.Compare[string])
}
