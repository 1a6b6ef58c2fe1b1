package slackapp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers Slack signs requests with.
const (
	headerSignature = "X-Slack-Signature"
	headerTimestamp = "X-Slack-Request-Timestamp"
	headerRetryNum  = "X-Slack-Retry-Num"
)

// Why a request was refused before it was read.
var (
	errMissingSignature = errors.New("missing X-Slack-Signature or X-Slack-Request-Timestamp")
	errBadTimestamp     = errors.New("malformed X-Slack-Request-Timestamp")
	errStaleTimestamp   = errors.New("request timestamp outside the accepted window")
	errBadSignature     = errors.New("signature does not match")
	errReplayed         = errors.New("request already seen")
)

// verifier checks Slack's v0 request signatures: an HMAC-SHA256, keyed
// with the signing secret, of "v0:<timestamp>:<body>", sent hex-encoded
// as "v0=<hex>". Requests whose timestamp is further than maxSkew from
// now either way are refused, so a captured request cannot be replayed
// later; within the window the signature is remembered in the Store, so
// it cannot be replayed at all, whichever replica it reaches.
type verifier struct {
	secret  []byte
	maxSkew time.Duration
	now     func() time.Time
	store   Store
}

// check verifies a request's signature and timestamp and records it as
// seen. It returns an error naming what is wrong; the error is safe to
// return to the caller, for it says nothing about the secret.
func (v *verifier) check(ctx context.Context, h http.Header, body []byte) error {
	sig, ts := h.Get(headerSignature), h.Get(headerTimestamp)
	if sig == "" || ts == "" {
		return errMissingSignature
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs <= 0 {
		return errBadTimestamp
	}
	if d := v.now().Sub(time.Unix(secs, 0)); d > v.maxSkew || d < -v.maxSkew {
		return errStaleTimestamp
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return errBadSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return errBadSignature
	}
	if !hmac.Equal(got, sign(v.secret, ts, body)) {
		return errBadSignature
	}
	// Only requests with a valid signature are remembered, so nobody
	// without the secret can fill the Store. The window is twice the skew:
	// a request stamped skew in the future stays acceptable that long.
	fresh, err := v.store.Claim(ctx, keySeen(hexSig), 2*v.maxSkew)
	if err != nil {
		return fmt.Errorf("record signature: %w", err)
	}
	if !fresh {
		return errReplayed
	}
	return nil
}

// sign computes Slack's v0 signature of a body sent at timestamp ts.
func sign(secret []byte, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	return mac.Sum(nil)
}

// refusal maps a verification error to the HTTP status and message the
// caller gets: every failure to authenticate is 401, a Store outage 503
// (Slack retries events; a user clicks again).
func refusal(err error) (int, string) {
	switch {
	case errors.Is(err, errMissingSignature), errors.Is(err, errBadTimestamp), errors.Is(err, errStaleTimestamp),
		errors.Is(err, errBadSignature), errors.Is(err, errReplayed):
		return http.StatusUnauthorized, err.Error()
	}
	return http.StatusServiceUnavailable, "cannot verify the request now; try again"
}
