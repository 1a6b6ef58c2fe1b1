package stream

import (
	"strconv"
	"strings"
)

// parseID splits a stream entry id "ms-seq"; a malformed id reads as 0-0.
func parseID(id string) (ms, seq uint64) {
	msText, seqText, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(msText, 10, 64)
	seq, _ = strconv.ParseUint(seqText, 10, 64)
	return ms, seq
}

// compareIDs orders stream entry ids as Redis does.
func compareIDs(a, b string) int {
	am, as := parseID(a)
	bm, bs := parseID(b)
	switch {
	case am < bm || (am == bm && as < bs):
		return -1
	case am == bm && as == bs:
		return 0
	}
	return 1
}

// nextID is the smallest id after id, for paging with inclusive ranges.
func nextID(id string) string {
	ms, seq := parseID(id)
	if seq == ^uint64(0) {
		return strconv.FormatUint(ms+1, 10) + "-0"
	}
	return strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(seq+1, 10)
}
