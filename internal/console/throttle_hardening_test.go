package console

import (
	"fmt"
	"testing"
	"time"
)

// Written in review (ui-review): when maxTracked addresses have failed
// within the window, failed() clears every record, so an address that was
// throttled may try again at once. Addresses are cheap for a client with
// an IPv6 prefix (each /128 counts alone).
func TestFillingTheThrottleDoesNotLiftAThrottledAddress(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	th := newThrottle(func() time.Time { return now })
	for range maxFailures {
		th.failed("2001:db8::1")
	}
	if th.allowed("2001:db8::1") {
		t.Fatal("not throttled after maxFailures")
	}
	for i := range maxTracked {
		th.failed(fmt.Sprintf("2001:db8::1:%x", i))
	}
	if th.allowed("2001:db8::1") {
		t.Fatalf("a throttled address may sign in again after %d other addresses failed once", maxTracked)
	}
}
