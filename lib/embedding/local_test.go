package embedding

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"testing"
)

func embedOne(t testing.TB, e Embedder, text string) []float32 {
	t.Helper()
	vs, err := e.Embed(context.Background(), []string{text})
	if err != nil {
		t.Fatalf("Embed(%.40q): %v", text, err)
	}
	if len(vs) != 1 || len(vs[0]) != e.Dimension() {
		t.Fatalf("Embed(%.40q) returned %d vectors, first of length %d; want 1 of %d", text, len(vs), len(vs[0]), e.Dimension())
	}
	return vs[0]
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestLocalEmbedIsDeterministic(t *testing.T) {
	texts := []string{
		"missing tests again",
		"The API key is hardcoded in config.go. Secrets must come from the environment.",
		"-\tfmt.Println(\"DEBUG total\", total)\nLeftover fmt.Println calls everywhere",
		"テストがありません", // Japanese: "there are no tests"
	}
	first := NewLocal(LocalOptions{})
	want, err := first.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	// Another instance, one text at a time, in reverse order, from many
	// goroutines: every path must give bit-identical vectors.
	second := NewLocal(LocalOptions{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := len(texts) - 1; i >= 0; i-- {
				got := embedOne(t, second, texts[i])
				for k := range got {
					if math.Float32bits(got[k]) != math.Float32bits(want[i][k]) {
						t.Errorf("text %d dimension %d: %v, first embedding gave %v", i, k, got[k], want[i][k])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestLocalVectorsHaveUnitLength(t *testing.T) {
	e := NewLocal(LocalOptions{})
	for _, text := range []string{
		"x1",
		"missing tests again",
		"no",
		strings.Repeat("flaky ", 2000),
		"The README still describes the old --config flag, which was removed two releases ago.",
		"Ünïcödé wörds ça marche",
	} {
		if n := norm(embedOne(t, e, text)); math.Abs(n-1) > 1e-5 {
			t.Errorf("norm of %.30q = %v, want 1", text, n)
		}
	}
}

func TestLocalTextWithoutWordsGivesZeroVector(t *testing.T) {
	e := NewLocal(LocalOptions{})
	other := embedOne(t, e, "missing tests again")
	for _, text := range []string{"", "   \n\t", "!!! --- ???", "\xff\xfe\xfd", "a", "- * -"} {
		v := embedOne(t, e, text)
		if n := norm(v); n != 0 {
			t.Errorf("norm of %q = %v, want the zero vector", text, n)
		}
		if c := Cosine(v, other); c != 0 {
			t.Errorf("Cosine(%q, other) = %v, want 0", text, c)
		}
	}
}

func TestLocalSurvivesGarbageInput(t *testing.T) {
	var invalid []byte
	for i := range 1 << 12 {
		invalid = append(invalid, byte(i*131+7))
	}
	megabyte := strings.Repeat("tests are flaky and the log is noisy, ", (1<<20)/38)
	for name, text := range map[string]string{
		"invalid UTF-8":        string(invalid),
		"1 MB":                 megabyte,
		"one huge token":       strings.Repeat("a", 1<<20),
		"NUL bytes":            "missing\x00tests\x00\x00",
		"emoji and marks":      "👍🏽 e\u0301 ﷺ 🇺🇳",
		"right to left":        "الاختبارات مفقودة",
		"rune cut at the cap":  strings.Repeat("x", MaxInputBytes-1) + "é tests",
		"camel case run":       strings.Repeat("ABCdefGHI", 1000),
		"apostrophes":          "''' don't ’’ '",
		"digits only":          "1234567890 3.14 0x1F",
		"separators in tokens": "a.b_c.d__e..f",
	} {
		t.Run(name, func(t *testing.T) {
			v := embedOne(t, NewLocal(LocalOptions{}), text)
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("dimension %d is %v", i, x)
				}
			}
			if n := norm(v); n != 0 && math.Abs(n-1) > 1e-5 {
				t.Errorf("norm = %v, want 1 or 0", n)
			}
		})
	}
}

func TestLocalReadsOnlyTheFirstMaxInputBytes(t *testing.T) {
	e := NewLocal(LocalOptions{})
	head := strings.Repeat("the retry loop has no log line ", MaxInputBytes/31+1)[:MaxInputBytes]
	a := embedOne(t, e, head+" hardcoded password")
	b := embedOne(t, e, head+" flaky tests everywhere")
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("texts that differ only after MaxInputBytes differ in dimension %d: %v and %v", i, a[i], b[i])
		}
	}
}

func TestLocalNameChangesWithDimension(t *testing.T) {
	seen := map[string]int{}
	for _, dim := range []int{256, 384, 512, 768, 1024} {
		e := NewLocal(LocalOptions{Dimension: dim})
		if e.Dimension() != dim {
			t.Errorf("Dimension() = %d, want %d", e.Dimension(), dim)
		}
		if !strings.HasSuffix(e.Name(), fmt.Sprintf("-%d", dim)) || !strings.Contains(e.Name(), localVersion) {
			t.Errorf("Name() = %q, want the version %q and the dimension %d", e.Name(), localVersion, dim)
		}
		if prev, ok := seen[e.Name()]; ok {
			t.Errorf("dimensions %d and %d share the name %q", prev, dim, e.Name())
		}
		seen[e.Name()] = dim
	}
	if got := NewLocal(LocalOptions{}).Name(); got != fmt.Sprintf("local-ngram-%s-%d", localVersion, DefaultLocalDimension) {
		t.Errorf("default Name() = %q", got)
	}
}

func TestLocalOptionsDimension(t *testing.T) {
	for _, tc := range []struct {
		dim       int
		wantDim   int
		wantValid bool
	}{
		{0, DefaultLocalDimension, true},
		{MinLocalDimension, MinLocalDimension, true},
		{1000, 1000, true},
		{MaxLocalDimension, MaxLocalDimension, true},
		{-1, MinLocalDimension, false},
		{1, MinLocalDimension, false},
		{MaxLocalDimension + 1, MaxLocalDimension, false},
	} {
		opts := LocalOptions{Dimension: tc.dim}
		if err := opts.Validate(); (err == nil) != tc.wantValid {
			t.Errorf("Validate(Dimension: %d) = %v, want valid %v", tc.dim, err, tc.wantValid)
		}
		if got := NewLocal(opts).Dimension(); got != tc.wantDim {
			t.Errorf("NewLocal(Dimension: %d).Dimension() = %d, want %d", tc.dim, got, tc.wantDim)
		}
	}
}

func TestLocalEmbedStopsWhenContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewLocal(LocalOptions{}).Embed(ctx, []string{"missing tests"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Embed with a cancelled context: %v, want context.Canceled", err)
	}
}

// goldenFingerprint pins the built-in tables and the vectors of reference
// texts. If this test fails, vectors changed: bump localVersion (so
// indexes re-embed instead of mixing old and new vectors) and update the
// fingerprint.
const goldenFingerprint = "local-ngram-v1-256:b67f682661daadd8"

func TestLocalGoldenVectorPinsLocalVersion(t *testing.T) {
	e := NewLocal(LocalOptions{})
	vs, err := e.Embed(context.Background(), []string{
		"missing tests again",
		"Leftover fmt.Println calls everywhere, please strip the debugging output.",
		"The API key is hardcoded in config.go; read it from the environment.",
		"tesst loging TestDelete resp.Body.Close() HTTPClient URLs don't",
	})
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	// Any edit to a table changes some text's vector, if not these.
	fmt.Fprint(h, concepts, stopWords, fillerWords, commonWords, blockWeights,
		calibration, fullConcepts, fillerWeight, commonWeight, numberWeight)
	for _, v := range vs {
		for _, x := range v {
			// Rounded to 1e-6 so the fingerprint survives a last-bit
			// difference between platforms.
			fmt.Fprintf(h, "%d,", int64(math.Round(float64(x)*1e6)))
		}
	}
	if got := fmt.Sprintf("%s:%016x", e.Name(), h.Sum64()); got != goldenFingerprint {
		t.Errorf("fingerprint %s, want %s: vectors changed, so bump localVersion and update goldenFingerprint", got, goldenFingerprint)
	}
}

func TestCosineIsExactOnSmallVectors(t *testing.T) {
	tests := []struct {
		a, b []float32
		want float64
	}{
		{[]float32{1, 0}, []float32{1, 0}, 1},
		{[]float32{1, 0}, []float32{0, 1}, 0},
		{[]float32{1, 0}, []float32{-2, 0}, -1},
		{[]float32{3, 4}, []float32{4, 3}, 24.0 / 25},
		{[]float32{0, 0}, []float32{1, 0}, 0},
		{[]float32{1}, []float32{1, 0}, 0},
	}
	for _, tt := range tests {
		if got := Cosine(tt.a, tt.b); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Cosine(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestCosineOfKnownVectors(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float32
		want float64
	}{
		{"identical", []float32{0.6, 0.8}, []float32{0.6, 0.8}, 1},
		{"scaled", []float32{1, 2, 3}, []float32{2, 4, 6}, 1},
		{"orthogonal", []float32{1, 0}, []float32{0, 1}, 0},
		{"opposite", []float32{1, -1}, []float32{-1, 1}, -1},
		{"different lengths", []float32{1, 0}, []float32{1, 0, 0}, 0},
		{"zero vector", []float32{0, 0}, []float32{1, 0}, 0},
		{"empty", nil, nil, 0},
	} {
		if got := Cosine(tc.a, tc.b); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: Cosine = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLocalSimilarityOfFeedbackPairs(t *testing.T) {
	const threshold = 0.8 // precept's default clustering threshold
	e := NewLocal(LocalOptions{})
	for _, tc := range []struct {
		a, b    string
		similar bool
	}{
		// Paraphrases with little shared vocabulary.
		{"missing tests again", "No test coverage for the new RateLimiter. Pls write unit tests.", true},
		{"remove the debug print statements before merging", "get rid of the debug printf's, they spam the output", true},
		{"hardcoded password in the db connection string!! never commit credentials", "credentials checked into the repo again (AWS access key in deploy.sh)", true},
		{"No deadline on the outbound call, pass a context with timeout", "requests.get without timeout= can block indefinitely", true},
		{"docs are out of date: the API reference lists fields that no longer exist", "the documentation doesn't match the code anymore", true},
		{"Exported functions have no doc comments. Every public symbol needs a godoc comment.", "missing docstrings on the public API", true},
		// Hard negatives: shared vocabulary, different complaint.
		{"tests are missing", "tests are flaky", false},
		{"add logging to the retry loop", "remove debug print statements", false},
		{"hardcoded password in the source", "the request logger writes the auth token to the log, redact it", false},
		{"Exported functions have no doc comments.", "The README is out of date.", false},
		{"Sprint planning: tasks are too big", "remove the print statements", false},
		// Unrelated.
		{"missing nil check before resp.Body", "estimates are wildly optimistic", false},
	} {
		c := Cosine(embedOne(t, e, tc.a), embedOne(t, e, tc.b))
		if (c >= threshold) != tc.similar {
			t.Errorf("Cosine(%q, %q) = %.3f, want similar=%v at %.1f", tc.a, tc.b, c, tc.similar, threshold)
		}
	}
}

func FuzzLocalEmbed(f *testing.F) {
	for _, seed := range []string{"", "missing tests again", "\xff\xfe", "HTTPClient.Close()", "tesst loging", "テスト", "a.b_c"} {
		f.Add(seed)
	}
	e := NewLocal(LocalOptions{})
	f.Fuzz(func(t *testing.T, text string) {
		a := embedOne(t, e, text)
		b := embedOne(t, e, text)
		if n := norm(a); n != 0 && math.Abs(n-1) > 1e-5 {
			t.Errorf("norm = %v, want 1 or 0", n)
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("dimension %d differs between two embeddings of the same text", i)
			}
		}
	})
}
