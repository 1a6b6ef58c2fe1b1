package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/gitrepo"
)

const exportSalt = "export-test-salt-0123456789"

// fillStrings sets every string in m, nested messages, lists and map
// keys included, to a value naming its field, and returns the values set
// by field.
func fillStrings(m protoreflect.Message, set map[protoreflect.FullName][]string) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && fd.ContainingOneof().Fields().Len() > 1 && m.WhichOneof(fd.ContainingOneof()) != nil {
			continue
		}
		marker := func(n int) string {
			v := fmt.Sprintf("secret-%s-%d", fd.Name(), n)
			set[fd.FullName()] = append(set[fd.FullName()], v)
			return v
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			if fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.Int32Kind {
				mp.Set(protoreflect.ValueOfString(marker(0)).MapKey(), protoreflect.ValueOfInt32(7))
			}
		case fd.Kind() == protoreflect.MessageKind:
			if fd.Message().FullName() == "google.protobuf.Timestamp" {
				continue
			}
			if fd.IsList() {
				l := m.Mutable(fd).List()
				for range 2 {
					e := l.NewElement()
					fillStrings(e.Message(), set)
					l.Append(e)
				}
				continue
			}
			fillStrings(m.Mutable(fd).Message(), set)
		case fd.Kind() == protoreflect.StringKind:
			if fd.IsList() {
				l := m.Mutable(fd).List()
				l.Append(protoreflect.ValueOfString(marker(0)))
				l.Append(protoreflect.ValueOfString(marker(1)))
				continue
			}
			m.Set(fd, protoreflect.ValueOfString(marker(0)))
		}
	}
}

// TestAnonymizingKeepsOnlyListedFieldsAndHashesIdentities fills every
// string of every exported message, the fields added after this test
// included, and checks that only the fields anonymizedFields keeps
// survive, identities as pseudonyms only.
func TestAnonymizingKeepsOnlyListedFieldsAndHashesIdentities(t *testing.T) {
	a := newAnonymizer(exportSalt)
	for _, msg := range []proto.Message{&preceptv1.Feedback{}, &preceptv1.Evaluation{}, &preceptv1.RuleEffect{}} {
		set := map[protoreflect.FullName][]string{}
		fillStrings(msg.ProtoReflect(), set)
		a.Anonymize(msg)
		out := prototext.Format(msg)
		for field, values := range set {
			for _, v := range values {
				present := strings.Contains(out, `"`+v+`"`)
				switch anonymizedFields[field] {
				case keep:
					if !present {
						t.Errorf("%s: kept field lost its value %q", field, v)
					}
				case hash, hashNamed:
					if present {
						t.Errorf("%s: identity %q not hashed", field, v)
					}
					if !strings.Contains(out, `"`+a.pseudonym(v)+`"`) {
						t.Errorf("%s: no pseudonym of %q in\n%s", field, v, out)
					}
				default:
					// drop, and keepPromptVersion, whose markers are
					// not precept's versions.
					if present {
						t.Errorf("%s: free text %q kept", field, v)
					}
				}
			}
		}
	}
}

// TestPeoplesWordsAndNamesAreNeverKept pins the fields the table above
// must not keep, whatever it says about others: what people typed, and
// who they are.
func TestPeoplesWordsAndNamesAreNeverKept(t *testing.T) {
	for _, f := range []protoreflect.FullName{
		"precept.v1.HITLDecision.reviewer_comment", "precept.v1.HITLDecision.agent_output", "precept.v1.HITLDecision.approved_output",
		"precept.v1.HITLDecision.correction_diff", "precept.v1.HITLDecision.correction_diff_path", "precept.v1.HITLDecision.tags",
		"precept.v1.Feedback.embedding_text", "precept.v1.Feedback.evaluation_error",
		"precept.v1.Evaluation.rationale", "precept.v1.RubricAttribute.evidence", "precept.v1.RubricAttribute.description",
		"precept.v1.Lesson.said", "precept.v1.Lesson.asked", "precept.v1.Lesson.problem", "precept.v1.Lesson.desired",
		"precept.v1.LessonEvidence.text", "precept.v1.RuleEffect.summary",
		// Producers' text, which may name people.
		"precept.v1.HITLDecision.scope_path",
	} {
		if p := anonymizedFields[f]; p != drop {
			t.Errorf("%s is free text, but anonymization does not drop it", f)
		}
	}
	for _, f := range []protoreflect.FullName{
		"precept.v1.HITLDecision.reviewer_id", "precept.v1.Feedback.source", "precept.v1.Feedback.producer",
		"precept.v1.ClusterStats.producers", "precept.v1.Lesson.by",
		// Ids producers choose, which may be email addresses.
		"precept.v1.HITLDecision.decision_id", "precept.v1.HITLDecision.epic_id", "precept.v1.HITLDecision.task_id",
		"precept.v1.Evaluation.decision_id", "precept.v1.Evaluation.similar_feedback_ids",
	} {
		if p := anonymizedFields[f]; p != hash && p != hashNamed {
			t.Errorf("%s names people, but anonymization does not hash it", f)
		}
	}
}

func TestPseudonymsAreStablePrefixedAndKeyedBySalt(t *testing.T) {
	a, b := newAnonymizer(exportSalt), newAnonymizer("another-salt-0123456789")
	p := a.pseudonym("erin")
	if p != a.pseudonym("erin") || !strings.HasPrefix(p, "anon-") || len(p) != len("anon-")+16 {
		t.Fatalf("pseudonym %q", p)
	}
	if p == a.pseudonym("frank") || p == b.pseudonym("erin") {
		t.Fatal("pseudonyms collide across people or salts")
	}
	if a.pseudonym("") != "" {
		t.Fatal("an absent identity got a pseudonym")
	}
	for in, want := range map[string]string{
		"api:ops":                            "api:" + a.pseudonym("ops"),
		"curator:erin":                       "curator:" + a.pseudonym("erin"),
		"stream:asdlc:events:hitl_decisions": "stream:asdlc:events:hitl_decisions",
		"llm:gpt-x":                          "llm:gpt-x",
		"deterministic":                      "deterministic",
		"someone":                            a.pseudonym("someone"),
	} {
		if got := a.pseudonymNamed(in); got != want {
			t.Errorf("pseudonymNamed(%q) = %q, want %q", in, got, want)
		}
	}
	if s := fmt.Sprint(a) + fmt.Sprintf("%+v %#v", a, a); strings.Contains(s, exportSalt) {
		t.Fatalf("printing the anonymizer shows the salt: %s", s)
	}
}

func TestAnonymizingKeepsOnlyPreceptsOwnPromptVersions(t *testing.T) {
	a := newAnonymizer(exportSalt)
	for in, want := range map[string]string{
		"v1:3f2a9c0d1e4b5a67":       "v1:3f2a9c0d1e4b5a67",
		"v1:3F2A9C0D1E4B5A67":       "",
		"v1:3f2a9c0d1e4b5a6":        "",
		"v1:3f2a9c0d1e4b5a67 alice": "",
		"v1:3f2a9c0d1e4b5a67\n":     "",
		"v2:3f2a9c0d1e4b5a67":       "",
		"alice-prompt-v1":           "",
	} {
		d := &preceptv1.HITLDecision{PromptVersion: in}
		a.Anonymize(d)
		if d.GetPromptVersion() != want {
			t.Errorf("prompt version %q became %q, want %q", in, d.GetPromptVersion(), want)
		}
	}
}

// exportEvaluations is the evaluator's lookup for handler tests: the
// evaluations the test made up, by decision.
type exportEvaluations map[string]evaluator.Evaluation

func (e exportEvaluations) Evaluation(_ context.Context, id string) (evaluator.Evaluation, string, error) {
	ev, ok := e[id]
	if !ok {
		return evaluator.Evaluation{}, "not yet", precept.Errorf(precept.NotFound, "decision %q has no evaluation yet", id)
	}
	return ev, "", nil
}

var exportTokens = map[string]string{"ops": "ops-token-0123456789ab", "alice": "alice-token-0123456789", "viewer": "viewer-token-012345678"}

// startExportServer stores decisions one a day from 2026-11-01 in a real
// feedback store and serves ExportService over it with the production
// interceptors.
func startExportServer(t *testing.T, n int, opts ExportOptions) (string, exportEvaluations) {
	t.Helper()
	return startExportServerOver(t, n, opts, func(s ExportStore) ExportStore { return s })
}

// openExportStore opens a real, empty feedback store.
func openExportStore(t *testing.T) *feedbackstore.Store {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	store, err := feedbackstore.Open(repo, filepath.Join(t.TempDir(), "feedback.db"), feedbackstore.Options{BatchWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// startExportServerOver is startExportServer with the store wrapped.
func startExportServerOver(t *testing.T, n int, opts ExportOptions, wrap func(ExportStore) ExportStore) (string, exportEvaluations) {
	t.Helper()
	store := openExportStore(t)
	evals := exportEvaluations{}
	day := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i := range n {
		d := precept.Decision{DecisionID: fmt.Sprintf("d%02d", i), GateID: "HITL-1", EpicID: "E1", Agent: "coder",
			Decision: precept.Rejected, ReviewerID: fmt.Sprintf("reviewer-%d", i%3), Timestamp: day.AddDate(0, 0, i),
			ReviewerComment: fmt.Sprintf("comment %d: use the retry helper", i)}
		if _, err := store.Store(t.Context(), []precept.Feedback{precept.NewFeedback(d, "api:ops", day)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			evals[d.DecisionID] = evaluator.Evaluation{DecisionID: d.DecisionID, Class: evaluator.EdgeCase, Confidence: 0.5,
				Rationale: "one reviewer so far", Evaluator: "deterministic", EvaluatedAt: day}
		}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var tokens []precept.Credential
	for name, tok := range exportTokens {
		role := map[string]precept.Role{"ops": precept.RoleAdmin, "alice": precept.RoleApprover, "viewer": precept.RoleReader}[name]
		tokens = append(tokens, credential(name, role, tok))
	}
	auth, err := NewAuthenticator(tokens)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(preceptv1connect.NewExportServiceHandler(NewExportService(wrap(store), evals, opts),
		connect.WithInterceptors(&AuthInterceptor{Auth: auth})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, evals
}

// exportAll runs an export as who and returns its records.
func exportAll(t *testing.T, url, who string, req *preceptv1.ExportRequest) ([]*preceptv1.ExportRecord, error) {
	t.Helper()
	hc := &http.Client{Transport: &bearer{token: exportTokens[who], next: http.DefaultTransport}}
	stream, err := preceptv1connect.NewExportServiceClient(hc, url).Export(t.Context(), connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var out []*preceptv1.ExportRecord
	for stream.Receive() {
		out = append(out, stream.Msg())
	}
	return out, stream.Err()
}

func TestExportStreamsTheRangeInCommitOrderPageByPage(t *testing.T) {
	fixture := []*preceptv1.RuleEffect{{RuleId: "R-1", Agents: []string{"coder"}, Exposures: 12, Summary: "recurs less often"}}
	url, _ := startExportServer(t, 7, ExportOptions{PageSize: 2, RuleEffects: func(context.Context) ([]*preceptv1.RuleEffect, error) {
		return fixture, nil
	}})
	// Days 2 to 5 (2026-11-03 .. 2026-11-06): decisions d02..d05.
	recs, err := exportAll(t, url, "alice", &preceptv1.ExportRequest{
		From: timestamppb.New(time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)),
		To:   timestamppb.New(time.Date(2026, 11, 7, 0, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		switch x := r.Record.(type) {
		case *preceptv1.ExportRecord_Decision:
			got = append(got, "decision "+x.Decision.GetDecision().GetDecisionId()+" "+x.Decision.GetDecision().GetReviewerComment())
		case *preceptv1.ExportRecord_Evaluation:
			got = append(got, "evaluation "+x.Evaluation.GetDecisionId()+" "+x.Evaluation.GetRationale())
		case *preceptv1.ExportRecord_RuleEffect:
			got = append(got, "effect "+x.RuleEffect.GetRuleId()+" "+x.RuleEffect.GetSummary())
		case *preceptv1.ExportRecord_Summary:
			s := x.Summary
			got = append(got, fmt.Sprintf("summary %d %d %d pending %d anonymized %v", s.Decisions, s.Evaluations, s.RuleEffects, s.PendingEvaluations, s.Anonymized))
		}
	}
	want := []string{
		"decision d02 comment 2: use the retry helper", "evaluation d02 one reviewer so far",
		"decision d03 comment 3: use the retry helper",
		"decision d04 comment 4: use the retry helper", "evaluation d04 one reviewer so far",
		"decision d05 comment 5: use the retry helper",
		"effect R-1 recurs less often",
		"summary 4 2 1 pending 2 anonymized false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// gatedStore holds the export's second page read until the gate opens,
// or for 3 s at most, so a server that reads ahead fails the test rather
// than hanging it.
type gatedStore struct {
	ExportStore
	reads atomic.Int32
	gate  chan struct{}
}

func (g *gatedStore) Since(seq uint64, limit int) ([]feedbackstore.Record, error) {
	if g.reads.Add(1) == 2 {
		select {
		case <-g.gate:
		case <-time.After(3 * time.Second):
		}
	}
	return g.ExportStore.Since(seq, limit)
}

func TestExportSendsEachPageBeforeReadingTheNext(t *testing.T) {
	gated := &gatedStore{gate: make(chan struct{})}
	url, _ := startExportServerOver(t, 6, ExportOptions{PageSize: 2}, func(s ExportStore) ExportStore {
		gated.ExportStore = s
		return gated
	})
	hc := &http.Client{Transport: &bearer{token: exportTokens["ops"], next: http.DefaultTransport}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	stream, err := preceptv1connect.NewExportServiceClient(hc, url).Export(ctx, connect.NewRequest(&preceptv1.ExportRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	// The server is held reading the second page: the first page's
	// records must already be on their way.
	if !stream.Receive() {
		t.Fatalf("no record while the second page is being read: %v", stream.Err())
	}
	if got := stream.Msg().GetDecision().GetDecision().GetDecisionId(); got != "d00" || gated.reads.Load() > 2 {
		t.Fatalf("first record %q after %d page reads", got, gated.reads.Load())
	}
	close(gated.gate)
	n := 1
	for stream.Receive() {
		n++
	}
	if err := stream.Err(); err != nil || n != 6+3+1 {
		t.Fatalf("%d records, %v", n, err)
	}
}

func TestAnonymizedExportHashesReviewersAndLeavesTheProvidersEffectsAlone(t *testing.T) {
	fixture := []*preceptv1.RuleEffect{{RuleId: "R-1", Summary: "recurs less often"}}
	url, _ := startExportServer(t, 3, ExportOptions{Salt: exportSalt, RuleEffects: func(context.Context) ([]*preceptv1.RuleEffect, error) {
		return fixture, nil
	}})
	recs, err := exportAll(t, url, "viewer", &preceptv1.ExportRequest{Anonymize: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3+2+1+1 {
		t.Fatalf("%d records", len(recs))
	}
	a := newAnonymizer(exportSalt)
	for _, r := range recs {
		text := prototext.Format(r)
		for _, secret := range []string{"reviewer-", "comment", "one reviewer so far", "recurs less often", "ops"} {
			if strings.Contains(text, secret) {
				t.Errorf("anonymized record holds %q:\n%s", secret, text)
			}
		}
		if d := r.GetDecision(); d != nil && !strings.HasPrefix(d.GetDecision().GetReviewerId(), "anon-") {
			t.Errorf("reviewer not hashed: %s", text)
		}
	}
	if got := recs[0].GetDecision().GetDecision().GetReviewerId(); got != a.pseudonym("reviewer-0") {
		t.Errorf("reviewer pseudonym %q", got)
	}
	if fixture[0].Summary != "recurs less often" {
		t.Fatal("anonymizing changed the provider's message")
	}
	sum := recs[len(recs)-1].GetSummary()
	if !sum.GetAnonymized() || sum.GetRuleEffects() != 1 {
		t.Fatalf("summary %v", sum)
	}
}

// TestAnonymizedExportHashesProducerChosenIDsAndDropsTheirText stores
// decisions whose ids, prompt version and scope path a producer filled
// with names: none may survive anonymization, the ids must still join a
// decision to its evaluation and to the evaluations that cite it, and a
// prompt version precept made is kept.
func TestAnonymizedExportHashesProducerChosenIDsAndDropsTheirText(t *testing.T) {
	store := openExportStore(t)
	day := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	const precepts = "v1:3f2a9c0d1e4b5a67"
	decisions := []precept.Decision{
		{DecisionID: "alice.smith@example.com:pr-42", GateID: "HITL-1", EpicID: "alice.smith@example.com", TaskID: "bob@corp",
			Agent: "coder", Decision: precept.Rejected, ReviewerID: "alice.smith@example.com", Timestamp: day,
			PromptVersion: "Alice Smith: the agent ignored my note", ScopePath: "home/alice.smith/salary-review.md",
			ReviewerComment: "secret comment"},
		{DecisionID: "carol@corp:pr-43", GateID: "HITL-1", EpicID: "alice.smith@example.com", TaskID: "carol@corp",
			Agent: "coder", Decision: precept.Rejected, ReviewerID: "carol@corp", Timestamp: day.Add(time.Minute),
			PromptVersion: precepts, ScopePath: "home/carol/notes.md"},
	}
	var fbs []precept.Feedback
	for _, d := range decisions {
		if err := d.Validate(precept.DefaultLimits(), day.Add(time.Hour)); err != nil {
			t.Fatalf("validate %s: %v", d.DecisionID, err)
		}
		fbs = append(fbs, precept.NewFeedback(d, "api:ops", day))
	}
	if _, err := store.Store(t.Context(), fbs); err != nil {
		t.Fatal(err)
	}
	first, second := decisions[0].DecisionID, decisions[1].DecisionID
	evals := exportEvaluations{
		first:  {DecisionID: first, Class: evaluator.EdgeCase, Evaluator: "deterministic", EvaluatedAt: day},
		second: {DecisionID: second, Class: evaluator.EdgeCase, Evaluator: "deterministic", EvaluatedAt: day, SimilarIDs: []string{first}, ClusterID: "c-4f2a9e0b1c3d"},
	}
	var recs []*preceptv1.ExportRecord
	_, err := NewExportService(store, evals, ExportOptions{Salt: exportSalt}).export(t.Context(), true, exportRange{},
		func(r *preceptv1.ExportRecord) error {
			recs = append(recs, r)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want 2 decisions and 2 evaluations", len(recs))
	}
	var all strings.Builder
	for _, r := range recs {
		all.WriteString(prototext.Format(r))
	}
	for _, leak := range []string{"alice", "Alice", "bob", "carol", "example.com", "corp", "salary", "home/", "ignored my note"} {
		if strings.Contains(all.String(), leak) {
			t.Errorf("anonymized export still holds %q:\n%s", leak, all.String())
		}
	}
	a := newAnonymizer(exportSalt)
	d1, e1 := recs[0].GetDecision().GetDecision(), recs[1].GetEvaluation()
	d2, e2 := recs[2].GetDecision().GetDecision(), recs[3].GetEvaluation()
	if d1.GetDecisionId() != a.pseudonym(first) || d1.GetEpicId() != a.pseudonym("alice.smith@example.com") || d1.GetTaskId() != a.pseudonym("bob@corp") {
		t.Errorf("ids not hashed with the export's key: %v", d1)
	}
	if d1.GetEpicId() != d2.GetEpicId() {
		t.Errorf("one epic got two pseudonyms: %q, %q", d1.GetEpicId(), d2.GetEpicId())
	}
	if e1.GetDecisionId() != d1.GetDecisionId() || e2.GetDecisionId() != d2.GetDecisionId() {
		t.Errorf("evaluations do not join their decisions: %q %q for %q %q", e1.GetDecisionId(), e2.GetDecisionId(), d1.GetDecisionId(), d2.GetDecisionId())
	}
	if got := e2.GetSimilarFeedbackIds(); len(got) != 1 || got[0] != d1.GetDecisionId() {
		t.Errorf("similar decisions %q do not join %q", got, d1.GetDecisionId())
	}
	if d1.GetPromptVersion() != "" || d1.GetScopePath() != "" || d2.GetScopePath() != "" {
		t.Errorf("producer text kept: prompt_version %q, scope paths %q %q", d1.GetPromptVersion(), d1.GetScopePath(), d2.GetScopePath())
	}
	// A cluster id derives from a decision id: hashed like one.
	if e2.GetClusterId() != a.pseudonym("c-4f2a9e0b1c3d") {
		t.Errorf("cluster id exported as %q", e2.GetClusterId())
	}
	if d2.GetPromptVersion() != precepts {
		t.Errorf("precept's prompt version %q became %q", precepts, d2.GetPromptVersion())
	}
}

func TestExportRefusesWhatItMustNotDo(t *testing.T) {
	url, _ := startExportServer(t, 1, ExportOptions{})
	day := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		who  string
		req  *preceptv1.ExportRequest
		code connect.Code
		want string
	}{
		{"reader, full", "viewer", &preceptv1.ExportRequest{}, connect.CodePermissionDenied, "a full export needs approver"},
		{"no salt", "ops", &preceptv1.ExportRequest{Anonymize: true}, connect.CodeFailedPrecondition, "export.salt"},
		{"from after to", "ops", &preceptv1.ExportRequest{From: timestamppb.New(day.AddDate(0, 0, 1)), To: timestamppb.New(day)}, connect.CodeInvalidArgument, "is not before to"},
		{"empty range", "ops", &preceptv1.ExportRequest{From: timestamppb.New(day), To: timestamppb.New(day)}, connect.CodeInvalidArgument, "is not before to"},
		{"bad timestamp", "ops", &preceptv1.ExportRequest{From: &timestamppb.Timestamp{Seconds: 1 << 60}}, connect.CodeInvalidArgument, "from: out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, err := exportAll(t, url, tt.who, tt.req)
			if connect.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) || len(recs) != 0 {
				t.Fatalf("%d records, err %v; want %v containing %q", len(recs), err, tt.code, tt.want)
			}
		})
	}
	recs, err := exportAll(t, url, "ops", &preceptv1.ExportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if sum := recs[len(recs)-1].GetSummary(); len(sum.GetNotes()) != 1 || !strings.Contains(sum.GetNotes()[0], "rule effects are not computed") {
		t.Fatalf("no note on the missing rule effects: %v", sum)
	}
}
