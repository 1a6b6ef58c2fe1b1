//go:build faultinject

package rules

import (
	"fmt"
	"os"
)

// With the faultinject build tag, PRECEPT_FAULT=<name> makes the process
// announce reaching that fault point on stderr and stop there for good,
// so that a test can kill it with SIGKILL at exactly that moment.
func init() {
	want := os.Getenv("PRECEPT_FAULT")
	if want == "" {
		return
	}
	faultPoint = func(name string) {
		if name != want {
			return
		}
		fmt.Fprintf(os.Stderr, "FAULT POINT REACHED: %s\n", name)
		select {}
	}
}
