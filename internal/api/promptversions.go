package api

import (
	"context"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/prompts"
)

// The versions a listing returns by default and at most, and the longest
// version name looked up (real ones are "v1:" and 16 hex digits).
const (
	defaultVersionPage = 20
	maxVersionPage     = 1000
	maxVersionName     = 100
)

// errNoVersions answers version requests on a server that records none.
var errNoVersions = precept.Errorf(precept.FailedPrecondition,
	"prompt versions are not recorded on this server (effects.enabled is off)")

// ListPromptTargets lists the agents and stages prompts can be built for.
func (s *PromptService) ListPromptTargets(_ context.Context, _ *connect.Request[preceptv1.ListPromptTargetsRequest]) (*connect.Response[preceptv1.ListPromptTargetsResponse], error) {
	return connect.NewResponse(&preceptv1.ListPromptTargetsResponse{Agents: s.Prompts.Agents(), Stages: s.Prompts.Stages()}), nil
}

// ListPromptVersions lists the versions recorded for an agent and a
// stage, of every scope (prompts with the same text share a version,
// recorded with the scope of the first request that got it), newest
// first, a page at a time.
func (s *PromptService) ListPromptVersions(ctx context.Context, req *connect.Request[preceptv1.ListPromptVersionsRequest]) (*connect.Response[preceptv1.ListPromptVersionsResponse], error) {
	const proc = preceptv1connect.PromptServiceListPromptVersionsProcedure
	m := req.Msg
	switch {
	case m.GetAgent() == "" || m.GetStage() == "":
		return nil, toConnect(ctx, s.Log, proc, invalid("agent, stage", "both are required"))
	case m.GetOffset() < 0:
		return nil, toConnect(ctx, s.Log, proc, invalid("offset", "must not be negative"))
	case m.GetLimit() < 0 || m.GetLimit() > maxVersionPage:
		return nil, toConnect(ctx, s.Log, proc, invalid("limit", "must be between 0 (the default, %d) and %d", defaultVersionPage, maxVersionPage))
	case s.Versions == nil:
		return nil, toConnect(ctx, s.Log, proc, errNoVersions)
	}
	limit := int(m.GetLimit())
	if limit == 0 {
		limit = defaultVersionPage
	}
	if err := s.Versions.Load(ctx); err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	recs := s.Versions.Select(func(r prompts.VersionRecord) bool { return r.Agent == m.GetAgent() && r.Stage == m.GetStage() })
	slices.SortFunc(recs, func(a, b prompts.VersionRecord) int {
		if c := b.FirstServed.Compare(a.FirstServed); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
	out := &preceptv1.ListPromptVersionsResponse{Total: int32(len(recs))}
	lo := min(int(m.GetOffset()), len(recs))
	for _, r := range recs[lo:min(len(recs), lo+limit)] {
		out.Versions = append(out.Versions, VersionToProto(r))
	}
	return connect.NewResponse(out), nil
}

// GetPromptVersion returns a recorded version and, when asked, its text
// assembled again from its commit (prompts.Assembler.Rebuild); when the
// text cannot be the one served, text_unavailable says why.
func (s *PromptService) GetPromptVersion(ctx context.Context, req *connect.Request[preceptv1.GetPromptVersionRequest]) (*connect.Response[preceptv1.GetPromptVersionResponse], error) {
	const proc = preceptv1connect.PromptServiceGetPromptVersionProcedure
	v := req.Msg.GetVersion()
	switch {
	case s.Versions == nil:
		return nil, toConnect(ctx, s.Log, proc, errNoVersions)
	case v == "":
		return nil, toConnect(ctx, s.Log, proc, invalid("version", "required"))
	case len(v) > maxVersionName:
		return nil, toConnect(ctx, s.Log, proc, invalid("version", "%q is not a prompt version", v[:maxVersionName]+"…"))
	}
	rec, ok, err := s.Versions.Lookup(ctx, v)
	if err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	if !ok {
		return nil, toConnect(ctx, s.Log, proc, precept.Errorf(precept.NotFound, "no prompt version %s is recorded", v))
	}
	out := &preceptv1.GetPromptVersionResponse{Version: VersionToProto(rec)}
	if req.Msg.GetWithText() {
		text, err := s.Prompts.Rebuild(ctx, rec)
		switch precept.ErrorCode(err) {
		case precept.FailedPrecondition, precept.NotFound, precept.Invalid:
			out.TextUnavailable = precept.ErrorMessage(err)
		default:
			if err != nil {
				return nil, toConnect(ctx, s.Log, proc, err)
			}
			out.Text = text
		}
	}
	return connect.NewResponse(out), nil
}

// VersionToProto converts a version record.
func VersionToProto(r prompts.VersionRecord) *preceptv1.PromptVersion {
	out := &preceptv1.PromptVersion{
		Version: r.Version, Shadow: r.Shadow, Agent: r.Agent, Stage: r.Stage, ScopeDir: r.ScopeDir,
		RuleIds: r.RuleIDs, RulesFiles: r.RulesFiles, BasePrompt: r.BasePrompt, BaseDigest: r.BaseDigest,
		Commit: r.Commit,
	}
	if !r.FirstServed.IsZero() {
		out.FirstServed = timestamppb.New(r.FirstServed)
	}
	return out
}
