package slackapp

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
)

// BenchmarkInteractionAck measures what a request costs before it is
// answered: reading, signature and replay checks (one claim in the
// Store), parsing. Slack allows 3 s.
func BenchmarkInteractionAck(b *testing.B) {
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) Store
	}{
		{"memory", func(*testing.B) Store { return NewMemoryStore(nil) }},
		{"redis", func(b *testing.B) Store {
			return NewRedisStore(testenv.RedisClient(b, testenv.Redis(b)), "bench:")
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ws := fakeslack.New(b)
			repo, err := gitrepo.Open(filepath.Join(b.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { repo.Close() })
			m, err := rules.New(repo, rules.Options{})
			if err != nil {
				b.Fatal(err)
			}
			svc, err := New(ws.Client(), m, NewPosts(repo, m, nil, nil), nil, tc.store(b), Options{Channel: testChannel, SigningSecret: testSecret})
			if err != nil {
				b.Fatal(err)
			}
			h := svc.Interactions()
			now := time.Now()
			reqs := make([]*http.Request, b.N)
			for i := range reqs {
				cb := slack.InteractionCallback{Type: slack.InteractionTypeViewClosed, User: slack.User{ID: uAlice}, TriggerID: time.Duration(i).String()}
				reqs[i] = fakeslack.Interaction("http://app/slack/interactions", testSecret, now, cb)
			}
			b.ResetTimer()
			for i := range b.N {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, reqs[i])
				if w.Code != http.StatusOK {
					b.Fatalf("answer %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
