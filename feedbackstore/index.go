package feedbackstore

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/boltopt"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/mapbound"
)

// indexVersion changes whenever the index layout changes; an index of
// another version is rebuilt from git.
const indexVersion = "2"

var (
	bucketRecords        = []byte("records")               // decision id -> Record JSON
	bucketByAgent        = []byte("by_agent")              // agent \x00 inverted time \x00 id -> nil
	bucketBySeq          = []byte("by_seq")                // seq -> decision id
	bucketClarifications = []byte("clarifications_by_seq") // seq -> Clarification JSON as a commit wrote it
	bucketThreads        = []byte("threads")               // clarification thread -> decision id
	bucketCorrections    = []byte("corrections_by_seq")    // seq -> Correction JSON
	bucketMeta           = []byte("meta")

	// dataBuckets are the buckets a rebuild empties. The clarification
	// and correction buckets came after version 2 without changing it: an
	// index written before them holds no such records because none
	// existed.
	dataBuckets = [][]byte{bucketRecords, bucketByAgent, bucketBySeq, bucketClarifications, bucketThreads, bucketCorrections}

	keyApplied = []byte("applied") // the last commit applied
	keySeq     = []byte("seq")     // the last sequence number given
	keyCount   = []byte("count")   // decisions indexed
	// keyGeneration counts the rebuilds of the index: a rebuild numbers
	// decisions again from one, so a reader that remembers numbers must
	// forget them (Position).
	keyGeneration = []byte("generation")
	keyVersion    = []byte("version")
)

// Record is a stored decision and where it lives.
type Record struct {
	precept.Feedback
	// Commit is the feedback-store commit that added the decision.
	Commit string `json:"commit"`
	// Seq numbers decisions in the order they were committed, the same on
	// every replica.
	Seq uint64 `json:"seq"`
}

// index is the node-local read model of the feedback branch.
type index struct {
	db *bolt.DB
	// untrack ends mapbound's hold on db's map.
	untrack func()
}

func openIndex(path string) (*index, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open index: %w", err)
	}
	db, err := bolt.Open(path, 0o644, boltopt.Options())
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, err)
	}
	ix := &index{db: db}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keyVersion); v != nil && string(v) != indexVersion {
			// An older layout: start again from git.
			for _, b := range dataBuckets {
				if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
					return err
				}
			}
			if err := deleteKeys(meta, keyApplied, keySeq, keyCount); err != nil {
				return err
			}
		}
		for _, b := range dataBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return meta.Put(keyVersion, []byte(indexVersion))
	})
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w", path, errors.Join(err, db.Close()))
	}
	ix.untrack = mapbound.Track(db)
	return ix, nil
}

func (ix *index) close() error {
	ix.untrack()
	return ix.db.Close()
}

// applied returns the last commit applied and the last sequence number.
func (ix *index) applied() (gitrepo.Hash, uint64, error) {
	var h gitrepo.Hash
	var seq uint64
	err := ix.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keyApplied); v != nil {
			h = gitrepo.Hash(v)
		}
		if v := meta.Get(keySeq); v != nil {
			seq = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return h, seq, err
}

func deleteKeys(b *bolt.Bucket, keys ...[]byte) error {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// reset empties the index, for a rebuild.
func (ix *index) reset() error {
	return ix.db.Update(func(tx *bolt.Tx) error {
		for _, b := range dataBuckets {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		var gen uint64
		if v := meta.Get(keyGeneration); v != nil {
			gen = binary.BigEndian.Uint64(v)
		}
		if err := meta.Put(keyGeneration, seqKey(gen+1)); err != nil {
			return err
		}
		return deleteKeys(meta, keyApplied, keyCount, keySeq)
	})
}

// appliedCommit is one commit's effect on the index.
type appliedCommit struct {
	commit  gitrepo.Hash
	added   []precept.Feedback // in commit order
	deleted []string
	// clarified are the clarification records the commit wrote, by
	// decision id.
	clarified []Clarification
	// corrected are the correction records the commit wrote, by id.
	corrected []Correction
}

// apply records commits in one transaction and moves the applied marker
// to the last of them, and returns how many entries it numbered.
// A decision indexed again (a commit that rewrote its file) takes a new
// number and gives up its old one. Within a commit the decisions come
// first, then the clarification records, then the correction records.
func (ix *index) apply(commits []appliedCommit) (int, error) {
	var n int
	err := ix.db.Update(func(tx *bolt.Tx) error {
		n = 0
		records := tx.Bucket(bucketRecords)
		byAgent := tx.Bucket(bucketByAgent)
		bySeq := tx.Bucket(bucketBySeq)
		clarifications, threads := tx.Bucket(bucketClarifications), tx.Bucket(bucketThreads)
		corrections := tx.Bucket(bucketCorrections)
		meta := tx.Bucket(bucketMeta)
		var seq, count uint64
		if v := meta.Get(keySeq); v != nil {
			seq = binary.BigEndian.Uint64(v)
		}
		if v := meta.Get(keyCount); v != nil {
			count = binary.BigEndian.Uint64(v)
		}
		for _, c := range commits {
			for _, id := range c.deleted {
				removed, err := ix.remove(records, byAgent, bySeq, id)
				if err != nil {
					return err
				}
				if removed {
					count--
				}
			}
			for _, f := range c.added {
				// A decision indexed again replaces its entries.
				replaced, err := ix.remove(records, byAgent, bySeq, f.DecisionID)
				if err != nil {
					return err
				}
				if !replaced {
					count++
				}
				seq++
				r := Record{Feedback: f, Commit: c.commit.String(), Seq: seq}
				b, err := json.Marshal(r)
				if err != nil {
					return err
				}
				if err := records.Put([]byte(f.DecisionID), b); err != nil {
					return err
				}
				if err := byAgent.Put(agentKey(f.Agent, f.Timestamp, f.DecisionID), nil); err != nil {
					return err
				}
				if err := bySeq.Put(seqKey(seq), []byte(f.DecisionID)); err != nil {
					return err
				}
				n++
			}
			for _, cl := range c.clarified {
				b, err := json.Marshal(cl)
				if err != nil {
					return err
				}
				seq++
				if err := clarifications.Put(seqKey(seq), b); err != nil {
					return err
				}
				if cl.Thread != "" {
					if err := threads.Put([]byte(cl.Thread), []byte(cl.DecisionID)); err != nil {
						return err
					}
				}
				n++
			}
			for _, co := range c.corrected {
				b, err := json.Marshal(co)
				if err != nil {
					return err
				}
				seq++
				if err := corrections.Put(seqKey(seq), b); err != nil {
					return err
				}
				n++
			}
			if err := meta.Put(keyApplied, c.commit[:]); err != nil {
				return err
			}
		}
		if err := meta.Put(keyCount, seqKey(count)); err != nil {
			return err
		}
		return meta.Put(keySeq, seqKey(seq))
	})
	return n, err
}

// remove drops a decision and its entries from the index and reports
// whether it was there.
func (ix *index) remove(records, byAgent, bySeq *bolt.Bucket, id string) (bool, error) {
	prev, ok, err := lookup(records, []byte(id))
	if err != nil || !ok {
		return false, err
	}
	if err := byAgent.Delete(agentKey(prev.Agent, prev.Timestamp, prev.DecisionID)); err != nil {
		return false, err
	}
	if err := bySeq.Delete(seqKey(prev.Seq)); err != nil {
		return false, err
	}
	return true, records.Delete([]byte(id))
}

// lookup decodes the indexed record of a decision, if there is one.
func lookup(records *bolt.Bucket, id []byte) (Record, bool, error) {
	v := records.Get(id)
	if v == nil {
		return Record{}, false, nil
	}
	var r Record
	if err := json.Unmarshal(v, &r); err != nil {
		return Record{}, false, fmt.Errorf("decode indexed %s: %w", id, err)
	}
	return r, true, nil
}

func seqKey(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

// agentKey sorts an agent's decisions newest first: the timestamp is
// stored inverted.
func agentKey(agent string, ts time.Time, id string) []byte {
	k := make([]byte, 0, len(agent)+len(id)+10)
	k = append(k, agent...)
	k = append(k, 0)
	k = binary.BigEndian.AppendUint64(k, math.MaxUint64-uint64(ts.UnixNano()))
	k = append(k, 0)
	return append(k, id...)
}

func (ix *index) get(id string) (Record, bool, error) {
	var r Record
	var found bool
	err := ix.db.View(func(tx *bolt.Tx) (err error) {
		r, found, err = lookup(tx.Bucket(bucketRecords), []byte(id))
		return err
	})
	return r, found, err
}

// position reads the index's Position in one transaction.
func (ix *index) position() (Position, error) {
	var p Position
	err := ix.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(keySeq); v != nil {
			p.Seq = binary.BigEndian.Uint64(v)
		}
		if v := meta.Get(keyCount); v != nil {
			p.Count = int(binary.BigEndian.Uint64(v))
		}
		if v := meta.Get(keyGeneration); v != nil {
			p.Generation = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return p, err
}

// count returns the number of indexed decisions, kept in the meta bucket
// because counting keys walks every page.
func (ix *index) count() (int, error) {
	var n int
	err := ix.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyCount); v != nil {
			n = int(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, err
}

// errBadPageToken is returned for page tokens this index did not issue.
var errBadPageToken = precept.Errorf(precept.Invalid, "page_token is not valid for this listing")

func (ix *index) listAgent(agent string, limit int, token string) ([]Record, string, error) {
	prefix := append([]byte(agent), 0)
	start := prefix
	if token != "" {
		after, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || len(after) <= len(prefix) || string(after[:len(prefix)]) != string(prefix) {
			return nil, "", errBadPageToken
		}
		start = append(after, 0)
	}
	var out []Record
	var next string
	err := ix.db.View(func(tx *bolt.Tx) error {
		records := tx.Bucket(bucketRecords)
		c := tx.Bucket(bucketByAgent).Cursor()
		for k, _ := c.Seek(start); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			if len(out) == limit {
				next = base64.RawURLEncoding.EncodeToString(out[len(out)-1].agentKey())
				return nil
			}
			r, ok, err := lookup(records, k[len(prefix)+9:])
			if err != nil {
				return err
			}
			if ok {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, next, err
}

func (r Record) agentKey() []byte { return agentKey(r.Agent, r.Timestamp, r.DecisionID) }

// entries returns up to limit entries numbered after seq, in order;
// with decisionsOnly it skips clarification and correction records.
func (ix *index) entries(seq uint64, limit int, decisionsOnly bool) ([]Entry, error) {
	var out []Entry
	err := ix.db.View(func(tx *bolt.Tx) error {
		records := tx.Bucket(bucketRecords)
		start := seqKey(seq + 1)
		dc := tx.Bucket(bucketBySeq).Cursor()
		dk, id := dc.Seek(start)
		var ck, rec, kk, corr []byte
		cc := tx.Bucket(bucketClarifications).Cursor()
		kc := tx.Bucket(bucketCorrections).Cursor()
		if !decisionsOnly {
			ck, rec = cc.Seek(start)
			kk, corr = kc.Seek(start)
		}
		// Merge the three numberings, which never share a number.
		for len(out) < limit && (dk != nil || ck != nil || kk != nil) {
			switch lowest(dk, ck, kk) {
			case 0:
				r, ok, err := lookup(records, id)
				if err != nil {
					return err
				}
				if ok {
					out = append(out, Entry{Seq: r.Seq, Decision: &r})
				}
				dk, id = dc.Next()
			case 1:
				var cl Clarification
				if err := json.Unmarshal(rec, &cl); err != nil {
					return fmt.Errorf("decode indexed clarification %d: %w", binary.BigEndian.Uint64(ck), err)
				}
				out = append(out, Entry{Seq: binary.BigEndian.Uint64(ck), Clarification: &cl})
				ck, rec = cc.Next()
			default:
				var co Correction
				if err := json.Unmarshal(corr, &co); err != nil {
					return fmt.Errorf("decode indexed correction %d: %w", binary.BigEndian.Uint64(kk), err)
				}
				out = append(out, Entry{Seq: binary.BigEndian.Uint64(kk), Correction: &co})
				kk, corr = kc.Next()
			}
		}
		return nil
	})
	return out, err
}

// lowest returns the position of the smallest non-nil key.
func lowest(keys ...[]byte) int {
	best := -1
	for i, k := range keys {
		if k != nil && (best < 0 || bytes.Compare(k, keys[best]) < 0) {
			best = i
		}
	}
	return best
}

// corrections returns up to limit correction records numbered after seq.
func (ix *index) corrections(seq uint64, limit int) ([]Entry, error) {
	var out []Entry
	err := ix.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketCorrections).Cursor()
		for k, v := c.Seek(seqKey(seq + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			var co Correction
			if err := json.Unmarshal(v, &co); err != nil {
				return fmt.Errorf("decode indexed correction %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, Entry{Seq: binary.BigEndian.Uint64(k), Correction: &co})
		}
		return nil
	})
	return out, err
}

// thread returns the decision a clarification thread asks about.
func (ix *index) thread(thread string) (string, bool, error) {
	var id string
	err := ix.db.View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketThreads).Get([]byte(thread)))
		return nil
	})
	return id, id != "", err
}

func hasPrefix(b, prefix []byte) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == string(prefix)
}
