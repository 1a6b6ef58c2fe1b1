package rules

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// The approver process: the test binary re-run with these variables set
// approves proposals in a repository another process uses too.
const (
	helperRepo  = "PRECEPT_RULES_HELPER_REPO"
	helperWho   = "PRECEPT_RULES_HELPER_WHO"
	helperIDs   = "PRECEPT_RULES_HELPER_IDS"
	helperStart = "PRECEPT_RULES_HELPER_START"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperRepo) != "" {
		os.Exit(approverProcess())
	}
	os.Exit(m.Run())
}

// approverProcess approves each proposal once the start file exists and
// prints one line per proposal: "<id> ok <status>" or "<id> <error code>".
func approverProcess() int {
	repo, err := gitrepo.Open(os.Getenv(helperRepo), gitrepo.Options{Signer: testSigner})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer repo.Close()
	m, err := New(repo, Options{RequiredApprovals: 3, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv(helperStart)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "no start signal")
			return 2
		}
	}
	for _, id := range strings.Split(os.Getenv(helperIDs), ",") {
		p, err := m.Approve(context.Background(), ApproveRequest{ProposalID: id, By: os.Getenv(helperWho), Via: rulefmt.ViaAPI})
		if err != nil {
			fmt.Fprintf(os.Stderr, "approve %s: %v\n", id, err)
			fmt.Printf("%s %s\n", id, precept.ErrorCode(err))
			continue
		}
		fmt.Printf("%s ok %s\n", id, p.Status)
	}
	return 0
}

// raceApprovals runs one approver process per name, all approving ids at
// once, and returns each process's lines by proposal id.
func raceApprovals(t *testing.T, repo string, ids []string, names ...string) map[string]map[string]string {
	t.Helper()
	start := filepath.Join(t.TempDir(), "start")
	type proc struct {
		name string
		cmd  *exec.Cmd
		out  strings.Builder
	}
	var procs []*proc
	for _, name := range names {
		p := &proc{name: name, cmd: exec.Command(os.Args[0], "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), helperRepo+"="+repo, helperWho+"="+name, helperIDs+"="+strings.Join(ids, ","), helperStart+"="+start)
		p.cmd.Stdout = &p.out
		p.cmd.Stderr = os.Stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	results := map[string]map[string]string{}
	for _, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("approver %s: %v\n%s", p.name, err, p.out.String())
		}
		results[p.name] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(p.out.String()), "\n") {
			id, rest, _ := strings.Cut(line, " ")
			results[p.name][id] = rest
		}
	}
	return results
}

func TestTwoProcessesRacingApprovalsLoseNoneAndMergeOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{RequiredApprovals: 3, MaxProposalsPerAgent: 100})
	var ids []string
	for i := range 8 {
		ev := cluster(fmt.Sprintf("c-%d", i), fmt.Sprintf("agent-%d", i), testsCluster...)
		ids = append(ids, f.proposeOne(ev).ID)
	}
	// alice and bob approve every proposal at the same time from two
	// processes: both approvals are recorded on every proposal.
	res := raceApprovals(t, f.repo.Path(), ids, "alice", "bob")
	for _, id := range ids {
		p := f.get(id)
		if res["alice"][id] != "ok PENDING" || res["bob"][id] != "ok PENDING" || len(p.Approvals) != 2 || p.Revision != 3 {
			t.Fatalf("%s after racing alice and bob: alice %q, bob %q, approvals %+v", id, res["alice"][id], res["bob"][id], p.Approvals)
		}
	}
	// carol and dave race for the third approval: exactly one completes
	// it, the other is told the proposal takes no more, and the proposal
	// is merged exactly once.
	res = raceApprovals(t, f.repo.Path(), ids, "carol", "dave")
	for _, id := range ids {
		outcomes := []string{res["carol"][id], res["dave"][id]}
		if !(outcomes[0] == "ok APPROVED" && outcomes[1] == string(precept.FailedPrecondition) ||
			outcomes[1] == "ok APPROVED" && outcomes[0] == string(precept.FailedPrecondition)) {
			t.Fatalf("%s: carol %q, dave %q", id, outcomes[0], outcomes[1])
		}
		merges := f.git("log", "--merges", "--format=%H", "--grep=Proposal-Id: "+id, "main")
		if n := len(strings.Fields(merges)); n != 1 {
			t.Fatalf("%s merged %d times", id, n)
		}
		r, _, err := f.m.Rule(ctx, rulefmt.RuleIDFor(id))
		if err != nil || len(r.Approvals) != 3 {
			t.Fatalf("rule of %s = %+v, %v", id, r, err)
		}
	}
	f.fsck()
}
