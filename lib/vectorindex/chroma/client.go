package chroma

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	chhttp "github.com/amikos-tech/chroma-go/pkg/commons/http"

	"github.com/precept-dev/precept/lib/vectorindex"
)

// Error is a failed exchange with the Chroma server. Its text never holds
// credentials: URLs in it are cut to scheme://host and the configured
// token and password are blanked.
type Error struct {
	// Status is the HTTP status; 0 when no response arrived or chroma-go
	// refused the request before sending it.
	Status int
	// Kind is Chroma's error name, e.g. "InvalidArgumentError".
	Kind    string
	Message string
}

func (e *Error) Error() string {
	switch {
	case e.Status != 0:
		return fmt.Sprintf("chroma: HTTP %d %s: %s", e.Status, e.Kind, e.Message)
	default:
		return "chroma: " + e.Message
	}
}

// fail wraps err from chroma-go as an *Error under op, adding the
// context's error when the context ended: chroma-go flattens transport
// errors to text, so errors.Is could not find it otherwise.
func (x *Index) fail(ctx context.Context, op string, err error) error {
	e := &Error{Message: x.redact(err.Error())}
	var ce *chhttp.ChromaError
	if errors.As(err, &ce) {
		e.Status, e.Message = ce.ErrorCode, x.redact(ce.Message)
		if ce.ErrorCode != 0 {
			e.Kind = ce.ErrorID
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w: %w", op, cerr, e)
	}
	return fmt.Errorf("%s: %w", op, e)
}

// urlPattern finds URLs in error text.
var urlPattern = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// newClient builds a chroma-go client for opts and the function that
// scrubs credentials from error text.
func newClient(opts Options) (v2.Client, func(string) string, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: unparsable chroma URL", vectorindex.ErrInvalid)
	}
	headers := http.Header{}
	var secrets []string
	if u.User != nil {
		pass, _ := u.User.Password()
		cred := u.User.Username() + ":" + pass
		headers.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
		secrets = append(secrets, pass, base64.StdEncoding.EncodeToString([]byte(cred)))
	}
	if opts.Token != "" {
		v := opts.Token
		if opts.TokenHeader == AuthorizationHeader {
			v = "Bearer " + v
		}
		headers.Set(string(opts.TokenHeader), v)
		secrets = append(secrets, opts.Token)
	}
	base := url.URL{Scheme: u.Scheme, Host: u.Host, Path: strings.TrimSuffix(u.Path, "/")}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Timeout: opts.Timeout, Transport: &headerTransport{base: transport, headers: headers}}

	redact := func(s string) string {
		s = urlPattern.ReplaceAllStringFunc(s, func(m string) string {
			p, err := url.Parse(strings.TrimRight(m, ".,;:)"))
			if err != nil || p.Host == "" {
				return "[url]"
			}
			return p.Scheme + "://" + p.Host
		})
		for _, sec := range secrets {
			if sec != "" {
				s = strings.ReplaceAll(s, sec, "[redacted]")
			}
		}
		return s
	}

	client, err := newHTTPClient(
		v2.WithBaseURL(base.String()),
		v2.WithDatabaseAndTenant(opts.Database, opts.Tenant),
		v2.WithHTTPClient(hc),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("create chroma client: %s", redact(err.Error()))
	}
	return client, redact, nil
}

// defaultClientMu serialises newHTTPClient. chroma-go v0.3.5's
// constructor points http.DefaultClient's Transport at a transport of its
// own before applying options, for the whole process; newHTTPClient puts
// the previous one back. Code reading http.DefaultClient at that very
// moment can still see the swap.
var defaultClientMu sync.Mutex

func newHTTPClient(opts ...v2.ClientOption) (v2.Client, error) {
	defaultClientMu.Lock()
	defer defaultClientMu.Unlock()
	saved := http.DefaultClient.Transport
	defer func() { http.DefaultClient.Transport = saved }()
	return v2.NewHTTPClient(opts...)
}

// headerTransport adds authentication headers to each request. chroma-go's
// own auth providers write into a map its requests read concurrently, so
// they are not used.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k := range t.headers {
		r.Header.Set(k, t.headers.Get(k))
	}
	return t.base.RoundTrip(r)
}
