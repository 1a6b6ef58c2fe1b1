package testenv

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// BenchSizesEnv names the environment variable that lists, comma-separated,
// the counts of stored decisions the benchmarks measure at: "1000" for a
// smoke run, "10000" for a quick one. Unset, they measure at their full
// sizes, the figures the README reports.
const BenchSizesEnv = "PRECEPT_BENCH_SIZES"

// benchFullSizes are the stored-decision counts the system benchmarks
// measure at when BenchSizesEnv is unset; the largest is the reference
// BenchSize scales from.
var benchFullSizes = []int{10_000, 100_000}

// BenchSizes returns the counts of stored decisions a benchmark measures
// at, ascending: those BenchSizesEnv lists, or 10,000 and 100,000 when it
// is unset. A malformed list fails the benchmark.
func BenchSizes(tb testing.TB) []int {
	tb.Helper()
	sizes, err := parseBenchSizes(os.Getenv(BenchSizesEnv))
	if err != nil {
		tb.Fatalf("%s: %v", BenchSizesEnv, err)
	}
	if sizes == nil {
		return slices.Clone(benchFullSizes)
	}
	return sizes
}

// BenchSize returns the one size of a benchmark that measures at full
// when BenchSizesEnv is unset, and otherwise full scaled as the largest
// listed size is to 100,000 (at least 1): with "10000", a 1M benchmark
// measures at 100,000 and a 50k one at 5,000; "10000,100000" gives full.
// A malformed list fails the benchmark.
func BenchSize(tb testing.TB, full int) int {
	tb.Helper()
	sizes, err := parseBenchSizes(os.Getenv(BenchSizesEnv))
	if err != nil {
		tb.Fatalf("%s: %v", BenchSizesEnv, err)
	}
	if sizes == nil {
		return full
	}
	return max(1, int(int64(full)*int64(sizes[len(sizes)-1])/int64(benchFullSizes[len(benchFullSizes)-1])))
}

// parseBenchSizes reads a comma-separated list of positive counts, and
// returns them sorted without repeats; nil for an empty value.
func parseBenchSizes(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var sizes []int
	for field := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a comma-separated list of positive counts of stored decisions, such as 1000 or 10000,100000", s)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}
