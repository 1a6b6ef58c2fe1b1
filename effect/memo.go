package effect

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// EffectMaxAge is how long one rule's effect, once computed, is served
// again to the console's rule page and GetRuleEffect before it is
// computed anew (docs/effects.md, "Reading an effect"). A computation
// reads every decision of the rule's agents since long before the rule,
// about 100 ms at a million stored decisions; the figures it yields
// move with days of decisions, not seconds.
const EffectMaxAge = 30 * time.Second

// effectMemo keeps the effect last computed for each rule, with the
// rule's content and retirement it was computed for: a rule edited,
// moved or retired since is computed anew at once.
type effectMemo struct {
	mu     sync.Mutex
	byRule map[string]memoized
}

type memoized struct {
	key [32]byte
	at  time.Time
	e   Effect
}

// memoKey identifies what an effect was computed from, besides the
// decisions.
func memoKey(r rulefmt.Rule, retired time.Time) [32]byte {
	b, err := json.Marshal(struct {
		R       rulefmt.Rule
		Retired time.Time
	}{r, retired})
	if err != nil {
		// Unmarshalable never matches: the effect is computed each time.
		return [32]byte{}
	}
	return sha256.Sum256(b)
}

func (m *effectMemo) get(id string, k [32]byte, now time.Time) (Effect, bool) {
	if k == ([32]byte{}) {
		return Effect{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.byRule[id]
	if !ok || v.key != k || now.Sub(v.at) >= EffectMaxAge || now.Before(v.at) {
		return Effect{}, false
	}
	return v.e, true
}

func (m *effectMemo) put(id string, k [32]byte, at time.Time, e Effect) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byRule == nil {
		m.byRule = map[string]memoized{}
	}
	m.byRule[id] = memoized{key: k, at: at, e: e}
}
