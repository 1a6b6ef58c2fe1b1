package english

import (
	"sync"
	"sync/atomic"

	"github.com/kljensen/snowball/english"
)

// MaxStemLen is the longest word Stem stems: longer tokens are hashes,
// base64 or minified code, noise a stemmer only spends time on.
const MaxStemLen = 32

// Stem returns the Snowball (Porter2) stem of a lower-case word of a to
// z, "retries" and "retrying" both "retri". Other words (digits, other
// scripts, longer than MaxStemLen) are returned as they are. It is safe
// for concurrent use, and remembers its answers up to a bound: reviews
// reuse a small vocabulary.
func Stem(w string) string {
	if len(w) > MaxStemLen || !IsASCIIWord(w) {
		return w
	}
	if s, ok := stems.Load(w); ok {
		return s.(string)
	}
	s := english.Stem(w, true)
	// The cache stops growing at its bound, so odd input cannot fill
	// memory.
	if stemsCached.Add(1) <= maxCachedStems {
		stems.Store(w, s)
	}
	return s
}

// stems caches the stemmer's answers.
var (
	stems       sync.Map
	stemsCached atomic.Int64
)

const maxCachedStems = 200_000

// IsASCIIWord reports whether w is made of the letters a to z only.
func IsASCIIWord(w string) bool {
	for i := range len(w) {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
