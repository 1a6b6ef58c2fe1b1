package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"hash/maphash"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"weak"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/prompts"
)

// PromptAssembler is what the prompt service needs of prompt assembly.
type PromptAssembler interface {
	Build(ctx context.Context, req prompts.Request) (*prompts.Prompt, error)
	Explain(ctx context.Context, req prompts.Request) (*prompts.Explanation, error)
	Watch(ctx context.Context, req prompts.Request, lastVersion string, send func(prompts.Update) error) error
	// Agents and Stages are those prompts can be built for; Rebuild
	// assembles a recorded version's text again.
	Agents() []string
	Stages() []string
	Rebuild(ctx context.Context, r prompts.VersionRecord) (string, error)
}

var _ PromptAssembler = (*prompts.Assembler)(nil)

// PromptService implements preceptv1connect.PromptServiceHandler.
type PromptService struct {
	Prompts PromptAssembler
	// Versions are the prompt versions recorded; nil when the server
	// records none (effects.enabled off).
	Versions *prompts.Versions
	Log      *slog.Logger

	responses responseMemo
}

var _ preceptv1connect.PromptServiceHandler = (*PromptService)(nil)

// BuildPrompt returns the assembled prompt. Agents call it on every run:
// a cached prompt is answered with a response message built once and
// shared, so the handler adds no work beyond Connect's own.
func (s *PromptService) BuildPrompt(ctx context.Context, req *connect.Request[preceptv1.BuildPromptRequest]) (*connect.Response[preceptv1.BuildPromptResponse], error) {
	m := req.Msg
	p, err := s.Prompts.Build(ctx, prompts.Request{Agent: m.GetAgent(), Stage: m.GetStage(), ScopePath: m.GetScopePath(), BasePrompt: m.BasePrompt})
	if err != nil {
		return nil, toConnect(ctx, s.Log, preceptv1connect.PromptServiceBuildPromptProcedure, err)
	}
	return connect.NewResponse(s.responses.get(p)), nil
}

// WatchPrompt streams the current prompt, then each new version, until the
// client goes away. The first message's reason is "changed" when the
// client's last_version differs from the current one, else "initial".
func (s *PromptService) WatchPrompt(ctx context.Context, req *connect.Request[preceptv1.WatchPromptRequest], stream *connect.ServerStream[preceptv1.WatchPromptResponse]) error {
	m := req.Msg
	r := prompts.Request{Agent: m.GetAgent(), Stage: m.GetStage(), ScopePath: m.GetScopePath(), BasePrompt: m.BasePrompt}
	err := s.Prompts.Watch(ctx, r, m.GetLastVersion(), func(u prompts.Update) error {
		return stream.Send(&preceptv1.WatchPromptResponse{Prompt: s.responses.get(u.Prompt), Reason: string(u.Reason)})
	})
	if err != nil && ctx.Err() != nil {
		// The client went away: nothing to report to anyone.
		return nil
	}
	return toConnect(ctx, s.Log, preceptv1connect.PromptServiceWatchPromptProcedure, err)
}

// ExplainPrompt says which base prompt, _rules.md files and rules apply,
// and why.
func (s *PromptService) ExplainPrompt(ctx context.Context, req *connect.Request[preceptv1.ExplainPromptRequest]) (*connect.Response[preceptv1.ExplainPromptResponse], error) {
	m := req.Msg
	e, err := s.Prompts.Explain(ctx, prompts.Request{Agent: m.GetAgent(), Stage: m.GetStage(), ScopePath: m.GetScopePath(), BasePrompt: m.BasePrompt})
	if err != nil {
		return nil, toConnect(ctx, s.Log, preceptv1connect.PromptServiceExplainPromptProcedure, err)
	}
	return connect.NewResponse(ExplanationToProto(e)), nil
}

// responseMemo remembers the response message built for each assembled
// prompt for as long as the prompt lives. The assembler caches prompts
// per rules commit and hands every agent asking for the same prompt the
// same *prompts.Prompt, so each is converted once and the message is
// shared by every response that carries it (Connect only reads it). An
// entry is keyed by a weak pointer and removed when the assembler drops
// the prompt, so the memo never keeps a prompt alive. The zero value is
// ready to use.
type responseMemo struct {
	mu sync.RWMutex
	m  map[weak.Pointer[prompts.Prompt]]*preceptv1.BuildPromptResponse
}

// get returns p's response message, building it on the first call. When
// first calls race, all of them get the message stored first.
func (r *responseMemo) get(p *prompts.Prompt) *preceptv1.BuildPromptResponse {
	k := weak.Make(p)
	r.mu.RLock()
	resp, ok := r.m[k]
	r.mu.RUnlock()
	if ok {
		return resp
	}
	resp = PromptToProto(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if stored, ok := r.m[k]; ok {
		return stored
	}
	if r.m == nil {
		r.m = make(map[weak.Pointer[prompts.Prompt]]*preceptv1.BuildPromptResponse)
	}
	r.m[k] = resp
	runtime.AddCleanup(p, r.forget, k)
	return resp
}

// forget drops the entry of a prompt that was garbage collected.
func (r *responseMemo) forget(k weak.Pointer[prompts.Prompt]) {
	r.mu.Lock()
	delete(r.m, k)
	r.mu.Unlock()
}

// PromptToProto converts an assembled prompt.
func PromptToProto(p *prompts.Prompt) *preceptv1.BuildPromptResponse {
	out := &preceptv1.BuildPromptResponse{
		Prompt:        p.Text,
		Version:       p.Version,
		ShadowPrompt:  p.ShadowText,
		ShadowVersion: p.ShadowVersion,
		RuleIds:       p.RuleIDs,
		ShadowRuleIds: p.ShadowRuleIDs,
		Commit:        p.Commit,
	}
	for _, s := range p.Sources {
		out.Sources = append(out.Sources, &preceptv1.PromptSource{Kind: string(s.Kind), Ref: s.Ref, Digest: s.Digest})
	}
	for _, x := range p.Excluded {
		out.Excluded = append(out.Excluded, &preceptv1.ExcludedRule{RuleId: x.RuleID, Reason: string(x.Reason), Detail: x.Detail})
	}
	return out
}

// ExplanationToProto converts an explanation; a rule's reason is its
// detail, prefixed with the reason code when it is left out.
func ExplanationToProto(e *prompts.Explanation) *preceptv1.ExplainPromptResponse {
	out := &preceptv1.ExplainPromptResponse{Version: e.Version, BasePromptRef: e.BasePromptRef, Summary: e.Summary}
	for _, f := range e.RulesFiles {
		out.RulesFiles = append(out.RulesFiles, &preceptv1.RulesFileExplanation{Path: f.Path, Exists: f.Exists, Reason: f.Reason})
	}
	for _, r := range e.Rules {
		reason := r.Detail
		if !r.Included {
			reason = string(r.Reason) + ": " + r.Detail
		}
		x := &preceptv1.RuleExplanation{
			RuleId:      r.ID,
			Included:    r.Included,
			Reason:      reason,
			Status:      string(r.Status),
			Importance:  string(r.Importance),
			Confidence:  r.Confidence,
			Position:    int32(r.Position),
			Content:     r.Content,
			FeedbackIds: r.FeedbackIDs,
		}
		for _, a := range r.Approvals {
			x.Approvers = append(x.Approvers, a.Approver)
		}
		out.Rules = append(out.Rules, x)
	}
	return out
}

// PromptCompression returns the handler option PromptService is served
// with: gzip as Connect does it by default, except that the compressed
// form of recent responses is remembered. Every agent asking for the same
// prompt gets the same response bytes, so each distinct response is
// compressed once rather than on every request (which would cost more
// than the rest of a cached BuildPrompt together).
func PromptCompression() connect.HandlerOption {
	m := &gzipMemo{seed: maphash.MakeSeed(), entries: map[uint64]gzipEntry{}, max: gzipMemoEntries}
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &gzip.Reader{} },
		func() connect.Compressor { return &memoCompressor{memo: m} },
	)
}

const (
	// gzipMemoEntries bounds the remembered responses; prompts are a few
	// KB, so this is a few MB at most.
	gzipMemoEntries = 1024
	// gzipMemoMaxBytes is the largest payload remembered; larger ones are
	// compressed every time.
	gzipMemoMaxBytes = 256 << 10
)

// gzipMemo maps payloads to their gzip form. When full, an arbitrary
// entry is evicted (Go randomises map iteration), so hits need only a
// read lock.
type gzipMemo struct {
	seed    maphash.Seed
	mu      sync.RWMutex
	entries map[uint64]gzipEntry
	max     int
	writers sync.Pool
}

type gzipEntry struct {
	// raw is kept so a hash collision can never send another payload.
	raw, gz []byte
}

func (m *gzipMemo) compress(raw []byte) ([]byte, error) {
	h := maphash.Bytes(m.seed, raw)
	m.mu.RLock()
	e, ok := m.entries[h]
	m.mu.RUnlock()
	if ok && bytes.Equal(e.raw, raw) {
		return e.gz, nil
	}
	var buf bytes.Buffer
	zw, _ := m.writers.Get().(*gzip.Writer)
	if zw == nil {
		zw = gzip.NewWriter(&buf)
	} else {
		zw.Reset(&buf)
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	m.writers.Put(zw)
	gz := buf.Bytes()
	if len(raw) <= gzipMemoMaxBytes {
		m.mu.Lock()
		for len(m.entries) >= m.max {
			for k := range m.entries {
				delete(m.entries, k)
				break
			}
		}
		m.entries[h] = gzipEntry{raw: bytes.Clone(raw), gz: gz}
		m.mu.Unlock()
	}
	return gz, nil
}

// memoCompressor is a connect.Compressor over a gzipMemo: it collects a
// message and writes its gzip form on Close.
type memoCompressor struct {
	memo *gzipMemo
	dst  io.Writer
	buf  []byte
}

func (c *memoCompressor) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *memoCompressor) Close() error {
	if c.dst == nil {
		return nil
	}
	gz, err := c.memo.compress(c.buf)
	if err != nil {
		return err
	}
	_, err = c.dst.Write(gz)
	c.dst = nil
	return err
}

func (c *memoCompressor) Reset(w io.Writer) {
	c.dst = w
	if cap(c.buf) > gzipMemoMaxBytes {
		// Do not keep a huge buffer alive in Connect's pool.
		c.buf = nil
	}
	c.buf = c.buf[:0]
}
