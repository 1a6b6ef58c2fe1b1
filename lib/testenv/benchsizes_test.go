package testenv

import (
	"slices"
	"testing"
)

func TestBenchSizesAreReadAsAscendingCountsAndRefuseAnythingElse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "", want: nil},
		{in: "10000", want: []int{10000}},
		{in: "100000,10000", want: []int{10000, 100000}},
		{in: " 1000 , 1000,500", want: []int{500, 1000}},
		{in: "10k", bad: true},
		{in: "1000,", bad: true},
		{in: "0", bad: true},
		{in: "-5", bad: true},
		{in: "1e4", bad: true},
	} {
		got, err := parseBenchSizes(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("parseBenchSizes(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestBenchSizeScalesWithTheLargestListedSize(t *testing.T) {
	for _, c := range []struct {
		env        string
		full, want int
	}{
		{env: "", full: 1_000_000, want: 1_000_000},
		{env: "10000,100000", full: 50_000, want: 50_000},
		{env: "10000", full: 1_000_000, want: 100_000},
		{env: "10000", full: 100_000, want: 10_000},
		{env: "1000", full: 10_000, want: 100},
		{env: "1", full: 10_000, want: 1},
	} {
		t.Setenv(BenchSizesEnv, c.env)
		if got := BenchSize(t, c.full); got != c.want {
			t.Errorf("%s=%q: BenchSize(%d) = %d, want %d", BenchSizesEnv, c.env, c.full, got, c.want)
		}
	}
	t.Setenv(BenchSizesEnv, "")
	if got := BenchSizes(t); !slices.Equal(got, benchFullSizes) {
		t.Errorf("unset: BenchSizes = %v, want %v", got, benchFullSizes)
	}
}
