package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// rulesNotice tells the other nodes, over Redis publish/subscribe, that
// this node moved the rules repository on the git server, so that they
// fetch at once rather than at their next rules.git.fetch_interval
// (docs/deploy.md, "How decisions reach every node"). A notice is only a
// hint to fetch: the server stays the record, and a notice lost while
// Redis fails over or a node restarts costs the wait for the next fetch.
// Each (re)subscription also fetches, covering what was missed.
type rulesNotice struct {
	rdb     redis.UniversalClient
	channel string
	// self marks this process's notices, which it ignores; a random id
	// rather than the node name, so that a restarted node is another
	// sender and two nodes misconfigured with one name still hear each
	// other.
	self    string
	pending chan string // a commit to announce, coalesced
	refetch chan struct{}
	log     *slog.Logger
}

// rulesNoticeSuffix is appended to redis.stream to name the channel, so
// that deployments sharing a Redis keep their notices apart.
const rulesNoticeSuffix = ":rules-changed"

func newRulesNotice(rdb redis.UniversalClient, stream string, log *slog.Logger) *rulesNotice {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	return &rulesNotice{
		rdb: rdb, channel: stream + rulesNoticeSuffix, self: hex.EncodeToString(id),
		pending: make(chan string, 1), refetch: make(chan struct{}, 1), log: log,
	}
}

// changed is the rule manager's change hook: a change this node made
// (not one it learnt from the remote, Via git) is announced. It never
// blocks the committing goroutine.
func (n *rulesNotice) changed(c rulefmt.Change) {
	if c.Via == rulefmt.ViaGit {
		return
	}
	select {
	case n.pending <- c.Commit:
	default: // one announcement already waiting says the same
	}
}

// run subscribes and announces until ctx ends.
func (n *rulesNotice) run(ctx context.Context) error {
	ps := n.rdb.Subscribe(ctx, n.channel)
	defer ps.Close()
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(10 * time.Second))
	// A notice that could not be published (Redis failing over) is tried
	// again after 1, 2 and 4 s; a newer change replaces it.
	var (
		retry   <-chan time.Time
		unsent  string
		retries int
	)
	publish := func(commit string) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := n.rdb.Publish(pctx, n.channel, n.self+" "+commit).Err()
		cancel()
		switch {
		case err == nil || ctx.Err() != nil:
			retry, unsent = nil, ""
		case retries < 3:
			retry, unsent = time.After(time.Second<<retries), commit
			retries++
		default:
			retry, unsent = nil, ""
			n.log.Warn("could not tell the other nodes of a rules change; they learn of it at their next fetch",
				"channel", n.channel, "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case commit := <-n.pending:
			retries = 0
			publish(commit)
		case <-retry:
			publish(unsent)
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			switch m := m.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					n.kick() // notices missed while not subscribed
				}
			case *redis.Message:
				if sender, _, _ := strings.Cut(m.Payload, " "); sender != n.self {
					n.kick()
				}
			}
		}
	}
}

func (n *rulesNotice) kick() {
	select {
	case n.refetch <- struct{}{}:
	default:
	}
}
