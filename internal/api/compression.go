package api

import (
	"compress/gzip"
	"io"

	"connectrpc.com/connect"
)

// FastCompression is the gzip every Connect handler answers with, at
// gzip's fastest level rather than its default. Responses travel inside
// a data centre, where bytes are cheap and a core is not: at a million
// stored decisions GetAnalytics spent 3.6 ms of its 11 ms deflating its
// response at the default level (docs/thresholds.md, "API server and
// logs"). PromptService replaces it with PromptCompression, which
// compresses each distinct prompt once.
func FastCompression() connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &gzip.Reader{} },
		func() connect.Compressor {
			w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
			return w
		},
	)
}
