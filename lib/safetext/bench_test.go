package safetext

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCheck measures the checks on rule-sized and file-sized text:
// prompt assembly runs them once per changed file.
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		s := strings.Repeat("Wrap errors from the retry loop with the attempt count; never log tokens. Закрывайте файлы. ", n)
		b.Run(fmt.Sprintf("%dB", len(s)), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if Check(s, nil) != "" {
					b.Fatal("flagged")
				}
			}
		})
	}
}
