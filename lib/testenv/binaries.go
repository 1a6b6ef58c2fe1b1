package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// module is the import path the binaries are built from.
const module = "github.com/precept-dev/precept"

var (
	binariesOnce sync.Once
	binariesDir  string
	binariesErr  error
)

// PreceptBinaries builds preceptd and the precept CLI once per test
// binary and returns their paths. Tests that run the real processes
// (the fault tests, the MCP interop test, the client examples) share
// it, so each package pays one build; Go's build cache makes the later
// packages' builds cheap.
func PreceptBinaries(t testing.TB) (preceptd, precept string) {
	t.Helper()
	binariesOnce.Do(func() {
		binariesDir, binariesErr = os.MkdirTemp("", "precept-bin-")
		if binariesErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binariesDir+"/", module+"/cmd/preceptd", module+"/cmd/precept").CombinedOutput()
		if err != nil {
			binariesErr = fmt.Errorf("go build preceptd and precept: %v\n%s", err, out)
		}
	})
	if binariesErr != nil {
		t.Fatal(binariesErr)
	}
	return filepath.Join(binariesDir, "preceptd"), filepath.Join(binariesDir, "precept")
}

// FreeAddr returns a loopback address whose port was free a moment
// ago, for a process the test starts.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
