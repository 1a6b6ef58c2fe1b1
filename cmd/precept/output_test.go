package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// enumPrefixes are the prefixes of every enum value of precept.v1.
func enumPrefixes(t *testing.T) []string {
	t.Helper()
	var out []string
	protoregistry.GlobalFiles.RangeFilesByPackage("precept.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Enums().Len(); i++ {
			out = append(out, screamingSnake(string(fd.Enums().Get(i).Name()))+"_")
		}
		return true
	})
	if len(out) < 8 {
		t.Fatalf("found %d enums in precept.v1", len(out))
	}
	return out
}

// sameButEnums walks protojson's value and ours side by side: they agree
// but for enum values, which protojson prefixes.
func sameButEnums(t *testing.T, at string, want, got any, prefixes []string) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			t.Fatalf("%s: %v, want %v", at, got, want)
		}
		for k := range w {
			sameButEnums(t, at+"."+k, w[k], g[k], prefixes)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Fatalf("%s: %v, want %v", at, got, want)
		}
		for i := range w {
			sameButEnums(t, at, w[i], g[i], prefixes)
		}
	case string:
		g, _ := got.(string)
		if g == w {
			for _, p := range prefixes {
				if strings.HasPrefix(w, p) {
					t.Fatalf("%s: %q keeps its enum prefix", at, g)
				}
			}
			return
		}
		for _, p := range prefixes {
			if w == p+g {
				return
			}
		}
		t.Fatalf("%s: %q, want %q", at, g, w)
	default:
		if want != got {
			t.Fatalf("%s: %v, want %v", at, got, want)
		}
	}
}

func TestJSONNamesEveryEnumPlainlyAndKeepsEverythingElse(t *testing.T) {
	at := timestamppb.Now()
	msgs := []proto.Message{
		&preceptv1.ListProposalsResponse{Proposals: []*preceptv1.Proposal{{
			ProposalId: "p-1", RuleType: preceptv1.RuleType_RULE_TYPE_CONSTRAINT, Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING,
			Kind: preceptv1.ProposalKind_PROPOSAL_KIND_NEW_RULE, RuleContent: "Never log tokens.\n\x1b[2J", CreatedAt: at,
			Approvals: []*preceptv1.Approval{{Approver: "alice", Note: "ok\u202e"}},
		}}, NextPageToken: "next"},
		&preceptv1.ListActiveRulesResponse{Rules: []*preceptv1.Rule{{RuleId: "r-1", Status: preceptv1.RuleStatus_RULE_STATUS_ROLLED_BACK,
			Importance: preceptv1.Importance_IMPORTANCE_CRITICAL, RuleType: preceptv1.RuleType_RULE_TYPE_GUIDELINE, Confidence: 0.75}}},
		&preceptv1.GetFeedbackResponse{Feedback: &preceptv1.Feedback{
			Decision:   &preceptv1.HITLDecision{DecisionId: "d-1", Decision: preceptv1.Verdict_VERDICT_APPROVED_WITH_CHANGES, Timestamp: at},
			Evaluation: &preceptv1.Evaluation{Classification: preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_HIGH, ProposedAction: &preceptv1.ProposedAction{Type: preceptv1.ActionType_ACTION_TYPE_CREATE_RULE}},
		}},
	}
	prefixes := enumPrefixes(t)
	for _, m := range msgs {
		for _, multiline := range []bool{true, false} {
			ours, err := marshalJSON(m, multiline)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			if err := json.Unmarshal(ours, &got); err != nil {
				t.Fatalf("%s", ours)
			}
			if err := json.Unmarshal(theirs, &want); err != nil {
				t.Fatal(err)
			}
			sameButEnums(t, string(m.ProtoReflect().Descriptor().Name()), want, got, prefixes)
			if lines := bytes.Count(ours, []byte("\n")); multiline != (lines > 0) {
				t.Fatalf("multiline %v printed %d line breaks:\n%s", multiline, lines, ours)
			}
			for _, c := range []string{"\x1b", "\u202e"} {
				if bytes.Contains(ours, []byte(c)) {
					t.Fatalf("%q is printed raw:\n%s", c, ours)
				}
			}
		}
	}
	b, _ := marshalJSON(msgs[2], false)
	for _, want := range []string{`"decision":"APPROVED_WITH_CHANGES"`, `"classification":"GENERALIZABLE_HIGH"`, `"type":"CREATE_RULE"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

func TestScreamingSnake(t *testing.T) {
	for in, want := range map[string]string{"Verdict": "VERDICT", "RuleStatus": "RULE_STATUS", "ActionType": "ACTION_TYPE", "HTTPStatus": "HTTP_STATUS", "Level2Kind": "LEVEL2_KIND"} {
		if got := screamingSnake(in); got != want {
			t.Errorf("screamingSnake(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeWriterEscapesCharactersSplitAcrossWrites(t *testing.T) {
	var out bytes.Buffer
	w := &escapeWriter{w: &out}
	zw := []byte("\u200b")
	for _, p := range [][]byte{[]byte("a"), zw[:1], zw[1:], []byte("b\x1b[2J\r"), []byte("日本")[:4]} {
		if n, err := w.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), `a\u200bb\x1b[2J\x0d日\xe6`; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
}

func TestFieldsIndentTheFurtherLinesOfAValue(t *testing.T) {
	var out bytes.Buffer
	fields(&out, "comment", "fine\nFAKE: approved by admin", "agent", "coding-agent")
	want := "comment  fine\n         FAKE: approved by admin\nagent    coding-agent\n"
	if out.String() != want {
		t.Fatalf("fields wrote %q, want %q", out.String(), want)
	}
}
