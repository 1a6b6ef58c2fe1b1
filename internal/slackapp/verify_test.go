package slackapp

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/lib/fakeslack"
)

func TestVerifierAcceptsSlackSignaturesOnceWithinTheSkew(t *testing.T) {
	now := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	body := []byte(`payload=%7B%22type%22%3A%22block_actions%22%7D`)
	signed := func(at time.Time, b []byte) http.Header { return fakeslack.Sign(testSecret, at, b) }
	with := func(h http.Header, key, value string) http.Header {
		h = h.Clone()
		if value == "" {
			h.Del(key)
		} else {
			h.Set(key, value)
		}
		return h
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"fresh", signed(now, body), body, nil},
		{"4m59s old", signed(now.Add(-299*time.Second), body), body, nil},
		{"4m59s ahead", signed(now.Add(299*time.Second), body), body, nil},
		{"no signature", with(signed(now, body), headerSignature, ""), body, errMissingSignature},
		{"no timestamp", with(signed(now, body), headerTimestamp, ""), body, errMissingSignature},
		{"timestamp not a number", with(signed(now, body), headerTimestamp, "yesterday"), body, errBadTimestamp},
		{"stale", signed(now.Add(-6*time.Minute), body), body, errStaleTimestamp},
		{"from the future", signed(now.Add(6*time.Minute), body), body, errStaleTimestamp},
		{"body changed", signed(now, body), append([]byte("x"), body...), errBadSignature},
		{"other secret", fakeslack.Sign("not-the-secret", now, body), body, errBadSignature},
		{"no v0 prefix", with(signed(now, body), headerSignature, signed(now, body).Get(headerSignature)[3:]), body, errBadSignature},
		{"not hex", with(signed(now, body), headerSignature, "v0=zz"), body, errBadSignature},
		{"short", with(signed(now, body), headerSignature, "v0=abcd"), body, errBadSignature},
		{"timestamp swapped", with(signed(now, body), headerTimestamp, strconv.FormatInt(now.Unix()-1, 10)), body, errBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verifier{secret: []byte(testSecret), maxSkew: 5 * time.Minute, now: func() time.Time { return now }, store: NewMemoryStore(func() time.Time { return now })}
			err := v.check(context.Background(), tc.header, tc.body)
			if !errors.Is(err, tc.want) {
				t.Fatalf("check = %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				if err := v.check(context.Background(), tc.header, tc.body); !errors.Is(err, errReplayed) {
					t.Fatalf("replay = %v, want %v", err, errReplayed)
				}
			}
		})
	}
}

func TestReplayWindowOutlivesTheSkew(t *testing.T) {
	c := newClock()
	store := NewMemoryStore(c.Now)
	v := verifier{secret: []byte(testSecret), maxSkew: 5 * time.Minute, now: c.Now, store: store}
	at := c.Now().Add(5 * time.Minute) // stamped at the edge of the future
	h := fakeslack.Sign(testSecret, at, []byte("b"))
	if err := v.check(context.Background(), h, []byte("b")); err != nil {
		t.Fatal(err)
	}
	// Until the stamp is older than the skew the request stays acceptable,
	// so it must stay remembered that long.
	c.Advance(9*time.Minute + 59*time.Second)
	if err := v.check(context.Background(), h, []byte("b")); !errors.Is(err, errReplayed) {
		t.Fatalf("replay 10 minutes later = %v, want %v", err, errReplayed)
	}
}

func TestSignaturesMatchSlackGosVerifier(t *testing.T) {
	body := []byte(`{"type":"url_verification","challenge":"abc"}`)
	h := fakeslack.Sign(testSecret, time.Now(), body)
	sv, err := slack.NewSecretsVerifier(h, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	sv.Write(body)
	if err := sv.Ensure(); err != nil {
		t.Fatalf("slack-go refuses the test signature: %v", err)
	}
}

func TestVerificationFailuresMapToUnauthorizedAndStoreOutagesToUnavailable(t *testing.T) {
	for _, err := range []error{errMissingSignature, errBadTimestamp, errStaleTimestamp, errBadSignature, errReplayed} {
		if code, msg := refusal(err); code != http.StatusUnauthorized || msg != err.Error() {
			t.Errorf("refusal(%v) = %d %q", err, code, msg)
		}
	}
	if code, _ := refusal(errors.New("redis: connection refused")); code != http.StatusServiceUnavailable {
		t.Errorf("store outage = %d", code)
	}
}
