package console_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// TestRuleEffectChartOfANewRuleSaysThereIsNoEvidenceYet: a rule just
// approved has no exposures; its chart draws what there is and says what
// is missing, and its data are the RPC's figures.
func TestRuleEffectChartOfANewRuleSaysThereIsNoEvidenceYet(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xaddJSON(t, clusterEvents()...)
	p := s.pendingProposal(t, ritaToken)
	ctx := context.Background()
	for _, tok := range []string{aliceToken, bobToken} {
		if _, err := s.rules(tok).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId()})); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.rules(ritaToken).GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: p.GetProposalId()}))
	if err != nil {
		t.Fatal(err)
	}
	id := got.Msg.GetProposal().GetRuleId()
	if id == "" {
		t.Fatalf("the approved proposal has no rule: %v", got.Msg.GetProposal())
	}

	v := s.signIn(t, ritaToken)
	base := "/ui/rules/" + id + "/effect?format="
	svg := v.download(base + "svg")
	if svg.status != http.StatusOK || svg.contentType != "image/svg+xml" || svg.disposition != `attachment; filename="`+id+`-effect.svg"` {
		t.Fatalf("effect as SVG: %d %s %s\n%s", svg.status, svg.contentType, svg.disposition, svg.body)
	}
	mustParseSVG(t, "effect.svg", svg.body)
	for _, want := range []string{">no exposures yet</text>", ">before activation</text>", "No evidence yet: the rule has no exposures."} {
		if !strings.Contains(string(svg.body), want) {
			t.Errorf("effect SVG lacks %q", want)
		}
	}
	rows := readCSV(t, "effect.csv", v.download(base+"csv").body)
	if len(rows) != 3 || rows[2][0] != "with the rule" || rows[2][1] != "0" || rows[2][3] != "" {
		t.Errorf("effect CSV of a rule without exposures: %q", rows)
	}
	eff, err := preceptv1connect.NewEffectServiceClient(&http.Client{Transport: bearer{ritaToken}}, s.url).
		GetRuleEffect(ctx, connect.NewRequest(&preceptv1.GetRuleEffectRequest{RuleId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if e := eff.Msg.GetEffect(); rows[1][0] != "before activation" || rows[1][1] != strconv.FormatInt(e.GetBeforeDecisions(), 10) {
		t.Errorf("effect CSV: %q; the RPC says %d decisions before activation", rows, e.GetBeforeDecisions())
	}
	if pic := v.download(base + "png"); pic.status != http.StatusOK || pic.contentType != "image/png" {
		t.Errorf("effect as PNG: %d %s", pic.status, pic.contentType)
	}
}
