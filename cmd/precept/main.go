// Command precept is the operator CLI for preceptd: a Connect client of
// its API.
//
// Global flags: --addr (env PRECEPT_ADDR, default http://127.0.0.1:8080),
// --token (env PRECEPT_TOKEN), -o text|json, --protocol connect|grpc.
// Errors print one line to stderr and exit with status 1 (2 for usage).
// SIGINT and SIGTERM cancel the command's context, so it stops cleanly
// (an export removes its temporary files); the CLI then exits with 130 or
// 143, as a shell reports a process those signals killed. A second signal
// kills it outright.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/safetext"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Main runs the CLI and returns its exit status; tests call it directly.
//
// Everything a command prints goes through an escaping writer
// (escapeWriter): a field holding ESC, CR, BS or BEL is shown escaped
// rather than obeyed by the terminal.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, interrupted, stop := signalContext()
	defer stop()
	out := &escapeWriter{w: stdout}
	defer out.Flush()
	c := &cli{stdin: stdin, stdout: out}
	root := c.root()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return 0
	case interrupted() != 0:
		fmt.Fprintln(stderr, "precept:", oneLine(err))
		return interrupted()
	case errors.As(err, new(usageError)):
		fmt.Fprintln(stderr, "precept:", safetext.EscapeLine(err.Error()))
		return 2
	default:
		fmt.Fprintln(stderr, "precept:", oneLine(err))
		return 1
	}
}

// signalContext returns a context that SIGINT or SIGTERM cancels, and
// interrupted, which returns the exit status for the signal that did
// (128 + its number), or 0. Once a signal has arrived the default
// behaviour is back, so a second one kills a command that does not heed
// its context (one reading stdin). stop releases the signals.
func signalContext() (ctx context.Context, interrupted func() int, stop func()) {
	term, stopTerm := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	ctx, stopInt := signal.NotifyContext(term, os.Interrupt)
	stop = func() {
		stopInt()
		stopTerm()
	}
	context.AfterFunc(ctx, stop)
	// A context stopped, not signalled, has context.Canceled itself as
	// its cause; a signal's cause describes the signal (and matches
	// context.Canceled under errors.Is, hence ==).
	signalled := func(ctx context.Context) bool {
		return ctx.Err() != nil && context.Cause(ctx) != context.Canceled
	}
	interrupted = func() int {
		switch {
		case signalled(term):
			return 128 + int(syscall.SIGTERM)
		case signalled(ctx):
			return 128 + int(syscall.SIGINT)
		}
		return 0
	}
	return ctx, interrupted, stop
}

// usageError is a mistake in how the CLI was called.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// oneLine renders an error as one line: Connect errors as "code: message",
// control characters (which a server error may quote) escaped.
func oneLine(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg := ce.Message()
		if ce.Code() == connect.CodeUnavailable && msg == "" {
			msg = "server unavailable"
		}
		return safetext.EscapeLine(strings.ReplaceAll(ce.Code().String()+": "+msg, "\n", " "))
	}
	return safetext.EscapeLine(strings.ReplaceAll(err.Error(), "\n", " "))
}

type cli struct {
	stdin  io.Reader
	stdout io.Writer

	addr     string
	token    string
	output   string
	protocol string
	timeout  time.Duration
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "precept",
		Short:         "Operate precept: feedback, evaluations, rule proposals and prompts",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch c.output {
			case "text", "json":
			default:
				return usagef("-o must be text or json, got %q", c.output)
			}
			switch c.protocol {
			case "connect", "grpc", "grpcweb":
			default:
				return usagef("--protocol must be connect, grpc or grpcweb, got %q", c.protocol)
			}
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{err.Error()} })
	f := root.PersistentFlags()
	f.StringVar(&c.addr, "addr", envOr("PRECEPT_ADDR", "http://127.0.0.1:8080"), "preceptd base URL (env PRECEPT_ADDR)")
	f.StringVar(&c.token, "token", os.Getenv("PRECEPT_TOKEN"), "API bearer token (env PRECEPT_TOKEN)")
	f.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
	f.StringVar(&c.protocol, "protocol", "connect", "RPC protocol: connect, grpc or grpcweb")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "request timeout")
	root.AddCommand(c.feedbackCmd(), c.dlqCmd(), c.pingCmd())
	root.AddCommand(c.promptCmd())
	root.AddCommand(c.proposalsCmd(), c.rulesCmd())
	root.AddCommand(c.similarCmd(), c.clustersCmd(), c.evaluationCmd(), c.reviewCmd(), c.taxonomyCmd())
	root.AddCommand(statsCmd(c))
	root.AddCommand(exportCmd(c))
	root.AddCommand(instructionsCmd(c))
	root.AddCommand(mcpCmd(c))
	return root
}

// authTransport adds the bearer token to every request.
type authTransport struct {
	token string
	next  http.RoundTripper
}

func (t *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.next.RoundTrip(r)
}

func (c *cli) httpClient() *http.Client {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if c.protocol == "grpc" {
		// gRPC needs HTTP/2; over plain http that is h2c.
		protocols = new(http.Protocols)
		protocols.SetUnencryptedHTTP2(true)
		protocols.SetHTTP2(true)
	}
	tr := &http.Transport{Protocols: protocols, ForceAttemptHTTP2: true}
	return &http.Client{Transport: &authTransport{token: c.token, next: tr}}
}

func (c *cli) clientOptions() []connect.ClientOption {
	switch c.protocol {
	case "grpc":
		return []connect.ClientOption{connect.WithGRPC()}
	case "grpcweb":
		return []connect.ClientOption{connect.WithGRPCWeb()}
	}
	return nil
}

func (c *cli) ctx(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), c.timeout)
}

func (c *cli) feedbackClient() preceptv1connect.FeedbackServiceClient {
	return preceptv1connect.NewFeedbackServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

func (c *cli) pingClient() preceptv1connect.PingServiceClient {
	return preceptv1connect.NewPingServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

// call makes one RPC under the command's timeout and returns its answer.
func call[Req, Resp any](c *cli, cmd *cobra.Command, rpc func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, error) {
	ctx, cancel := c.ctx(cmd)
	defer cancel()
	resp, err := rpc(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}
