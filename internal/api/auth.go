package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// LocalIdentity is who callers are when no tokens are configured: the
// server then listens on loopback only, and whoever can reach it runs on
// the same machine. The Guard also refuses requests addressed to other
// host names, which a browser tricked by DNS rebinding would send.
var LocalIdentity = precept.Identity{Name: "local", Role: precept.RoleAdmin}

// Authenticator maps bearer tokens to identities.
type Authenticator struct {
	byDigest map[string]precept.Identity
}

// NewAuthenticator builds an authenticator from the configured
// credentials; with none, every caller is LocalIdentity.
func NewAuthenticator(creds []precept.Credential) (*Authenticator, error) {
	a := &Authenticator{byDigest: map[string]precept.Identity{}}
	for _, c := range creds {
		switch {
		case c.Identity.Name == "":
			return nil, errors.New("a credential has no name")
		case c.Identity.Role == precept.RoleNone:
			return nil, fmt.Errorf("token %s: no role", c.Identity.Name)
		case c.Digest == "":
			return nil, fmt.Errorf("token %s: no digest", c.Identity.Name)
		}
		a.byDigest[c.Digest] = c.Identity
	}
	return a, nil
}

// IdentifyToken returns the identity a token authenticates and the
// token's SHA-256 digest, which sessions keep instead of the token.
func (a *Authenticator) IdentifyToken(token string) (precept.Identity, string, error) {
	if token == "" {
		return precept.Identity{}, "", precept.Errorf(precept.Unauthenticated, "missing token")
	}
	digest := precept.TokenDigest(token)
	id, ok := a.byDigest[digest]
	if !ok {
		return precept.Identity{}, "", precept.Errorf(precept.Unauthenticated, "unknown token")
	}
	return id, digest, nil
}

// IdentifyDigest returns the identity of the token with this digest, if
// it is still configured.
func (a *Authenticator) IdentifyDigest(digest string) (precept.Identity, bool) {
	id, ok := a.byDigest[digest]
	return id, ok
}

// Open reports whether no tokens are configured.
func (a *Authenticator) Open() bool { return len(a.byDigest) == 0 }

// Identify returns the identity of the request's bearer token. Tokens are
// compared by SHA-256 digest, so neither timing nor the map reveals them.
func (a *Authenticator) Identify(h http.Header) (precept.Identity, error) {
	if a.Open() {
		return LocalIdentity, nil
	}
	auth := h.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || token == "" {
		return precept.Identity{}, precept.Errorf(precept.Unauthenticated, "missing bearer token (Authorization: Bearer <token>)")
	}
	id, _, err := a.IdentifyToken(token)
	return id, err
}

// procedureRoles says which role each procedure needs. Procedures not
// listed need admin, so a new RPC is closed until someone opens it.
var procedureRoles = map[string]precept.Role{
	preceptv1connect.PingServicePingProcedure: precept.RoleReader,

	preceptv1connect.FeedbackServiceRecordFeedbackProcedure:       precept.RoleRecorder,
	preceptv1connect.FeedbackServiceGetFeedbackProcedure:          precept.RoleReader,
	preceptv1connect.FeedbackServiceListFeedbackForAgentProcedure: precept.RoleReader,
	preceptv1connect.FeedbackServiceListDeadLettersProcedure:      precept.RoleReader,
	preceptv1connect.FeedbackServiceFindSimilarProcedure:          precept.RoleReader,
	// Replaying re-injects decisions under the stream's name and dropping
	// destroys the only copy of an input: operators' work, not approvers'.
	preceptv1connect.FeedbackServiceReplayDeadLettersProcedure: precept.RoleAdmin,
	preceptv1connect.FeedbackServiceDropDeadLettersProcedure:   precept.RoleAdmin,

	preceptv1connect.EvaluatorServiceEvaluateProcedure:           precept.RoleRecorder,
	preceptv1connect.EvaluatorServiceGetEvaluationProcedure:      precept.RoleReader,
	preceptv1connect.EvaluatorServiceListClustersProcedure:       precept.RoleReader,
	preceptv1connect.EvaluatorServiceGetClusterProcedure:         precept.RoleReader,
	preceptv1connect.EvaluatorServiceListNeedsReviewProcedure:    precept.RoleReader,
	preceptv1connect.EvaluatorServiceSuggestMergesProcedure:      precept.RoleReader,
	preceptv1connect.EvaluatorServiceGetLearnedTaxonomyProcedure: precept.RoleReader,
	preceptv1connect.EvaluatorServiceListCategoriesProcedure:     precept.RoleReader,
	// Curators correct judgement as they approve rules.
	preceptv1connect.EvaluatorServiceCorrectClustersProcedure: precept.RoleApprover,
	preceptv1connect.EvaluatorServiceReclusterProcedure:       precept.RoleApprover,

	preceptv1connect.RuleServiceListProposalsProcedure:            precept.RoleReader,
	preceptv1connect.RuleServiceGetProposalProcedure:              precept.RoleReader,
	preceptv1connect.RuleServiceProposeRuleProcedure:              precept.RoleApprover,
	preceptv1connect.RuleServiceApproveRuleProcedure:              precept.RoleApprover,
	preceptv1connect.RuleServiceRejectRuleProcedure:               precept.RoleApprover,
	preceptv1connect.RuleServiceListActiveRulesProcedure:          precept.RoleReader,
	preceptv1connect.RuleServiceGetRuleProcedure:                  precept.RoleReader,
	preceptv1connect.RuleServiceRollbackRuleProcedure:             precept.RoleApprover,
	preceptv1connect.RuleServiceCheckConflictsProcedure:           precept.RoleReader,
	preceptv1connect.RuleServiceGetRuleHistoryProcedure:           precept.RoleReader,
	preceptv1connect.RuleServiceListIgnoredRemoteChangesProcedure: precept.RoleReader,

	preceptv1connect.EffectServiceGetRuleEffectProcedure:   precept.RoleReader,
	preceptv1connect.EffectServiceListRuleEffectsProcedure: precept.RoleReader,

	preceptv1connect.PromptServiceBuildPromptProcedure:        precept.RoleReader,
	preceptv1connect.PromptServiceWatchPromptProcedure:        precept.RoleReader,
	preceptv1connect.PromptServiceExplainPromptProcedure:      precept.RoleReader,
	preceptv1connect.PromptServiceListPromptTargetsProcedure:  precept.RoleReader,
	preceptv1connect.PromptServiceListPromptVersionsProcedure: precept.RoleReader,
	preceptv1connect.PromptServiceGetPromptVersionProcedure:   precept.RoleReader,

	preceptv1connect.AnalyticsServiceGetAnalyticsProcedure: precept.RoleReader,

	// Readers may export anonymized; the handler asks more of a full
	// export (fullExportRole).
	preceptv1connect.ExportServiceExportProcedure: precept.RoleReader,
}

// RequiredRole returns the role a procedure needs.
func RequiredRole(procedure string) precept.Role {
	if r, ok := procedureRoles[procedure]; ok {
		return r
	}
	return precept.RoleAdmin
}

// AuthInterceptor authenticates every call and checks its role, putting
// the caller's identity in the context for handlers (approvals record
// it). In preceptd the Guard has already refused what it would refuse,
// before the body was read; the interceptor stays for the identity and
// for handlers served without the guard.
type AuthInterceptor struct {
	Auth *Authenticator
}

var _ connect.Interceptor = (*AuthInterceptor)(nil)

func (i *AuthInterceptor) authorize(ctx context.Context, procedure string, h http.Header) (context.Context, error) {
	id, ok := ctx.Value(inProcessKey{}).(precept.Identity)
	if !ok {
		var err error
		if id, err = i.Auth.Identify(h); err != nil {
			return ctx, unauthenticated(err)
		}
	}
	if need := RequiredRole(procedure); !id.Allows(need) {
		return ctx, permissionDenied(id, procedure, need)
	}
	return precept.WithIdentity(ctx, id), nil
}

// unauthenticated is the error for a missing or unknown token.
func unauthenticated(err error) *connect.Error {
	return connect.NewError(connect.CodeUnauthenticated, errors.New(precept.ErrorMessage(err)))
}

// permissionDenied is the error for a caller whose role is too low.
func permissionDenied(id precept.Identity, procedure string, need precept.Role) *connect.Error {
	return connect.NewError(connect.CodePermissionDenied,
		fmt.Errorf("%s has role %s; %s needs %s", id.Name, id.Role, procedure[strings.LastIndexByte(procedure, '/')+1:], need))
}

// WrapUnary implements connect.Interceptor.
func (i *AuthInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, err := i.authorize(ctx, req.Spec().Procedure, req.Header())
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient implements connect.Interceptor.
func (i *AuthInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler implements connect.Interceptor.
func (i *AuthInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.authorize(ctx, conn.Spec().Procedure, conn.RequestHeader())
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// inProcessKey marks a context carrying the identity of an in-process
// caller.
type inProcessKey struct{}

// InProcess returns ctx carrying id as the caller of RPCs made in the same
// process, such as the web console's on behalf of a signed-in user (who
// proved the identity with a token at sign-in). Requests from the network
// cannot carry it: net/http builds their contexts. The role check still
// applies to id.
func InProcess(ctx context.Context, id precept.Identity) context.Context {
	return context.WithValue(ctx, inProcessKey{}, id)
}

// inProcessViaKey marks the channel of an in-process caller that is not
// the console.
type inProcessViaKey struct{}

// InProcessVia is InProcess for a channel other than the web console,
// such as the MCP server (rulefmt.ViaMCP): the decisions made through it
// record that channel.
func InProcessVia(ctx context.Context, id precept.Identity, via string) context.Context {
	return context.WithValue(InProcess(ctx, id), inProcessViaKey{}, via)
}

// via is the channel a decision came through: the one an in-process
// caller named, else the console for in-process calls, else the API.
func via(ctx context.Context) string {
	if _, ok := ctx.Value(inProcessKey{}).(precept.Identity); ok {
		if v, ok := ctx.Value(inProcessViaKey{}).(string); ok {
			return v
		}
		return rulefmt.ViaConsole
	}
	return rulefmt.ViaAPI
}

// caller returns the identity the interceptor put in the context.
func caller(ctx context.Context) precept.Identity {
	if id, ok := precept.IdentityFrom(ctx); ok {
		return id
	}
	return precept.Identity{Name: "unknown"}
}
