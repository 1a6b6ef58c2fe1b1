package lesson

import "testing"

// BenchmarkClassify is the cost of placing one comment in the embedded
// taxonomy.
func BenchmarkClassify(b *testing.B) {
	c := DefaultSource().Classifier()
	in := Input{Comment: "The error from db.Close() is silently dropped in saveUser; return it so the caller sees failed cleanups.",
		Tags: []string{"reliability"}, Agent: "coding-agent"}
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(in)
	}
}

// BenchmarkNewClassifier is the cost of building the classifier of the
// embedded taxonomy, paid once per process and on every curator-file
// change.
func BenchmarkNewClassifier(b *testing.B) {
	t := DefaultTaxonomy()
	for b.Loop() {
		NewClassifier(t)
	}
}
