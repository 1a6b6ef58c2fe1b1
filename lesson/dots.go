package lesson

import "sync"

// dotScratch accumulates a comment's dot products with the phrasings,
// densely by phrasing and reused from one comment to the next: a map
// grown and dropped per comment was the largest allocation of ingest
// (about 45 KB a decision). A phrasing's sum adds the same terms in the
// same order as before, so scores are bit for bit the same.
type dotScratch struct {
	dots []float64
	// stamp[i] == gen marks dots[i] as written for this comment;
	// touched lists those phrasings in the order first written.
	stamp   []uint32
	gen     uint32
	touched []int
}

var dotPool = sync.Pool{New: func() any { return new(dotScratch) }}

// start readies the scratch for a comment against n phrasings.
func (s *dotScratch) start(n int) {
	if len(s.dots) < n {
		s.dots, s.stamp, s.gen = make([]float64, n), make([]uint32, n), 0
	}
	s.gen++
	if s.gen == 0 {
		clear(s.stamp)
		s.gen = 1
	}
	s.touched = s.touched[:0]
}

// add adds v to phrasing i's sum.
func (s *dotScratch) add(i int, v float64) {
	if s.stamp[i] != s.gen {
		s.stamp[i], s.dots[i] = s.gen, 0
		s.touched = append(s.touched, i)
	}
	s.dots[i] += v
}
