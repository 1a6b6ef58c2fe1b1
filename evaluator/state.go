package evaluator

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/precept-dev/precept/lib/boltopt"
	"github.com/precept-dev/precept/lib/mapbound"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// stateVersion changes when the layout changes; another version is
// rebuilt by re-evaluating the feedback store from the start.
const stateVersion = "3"

var (
	bEvals       = []byte("evaluations")  // decision id -> Evaluation
	bClusters    = []byte("clusters")     // cluster id -> Cluster (running counts)
	bMembers     = []byte("members")      // cluster id \x00 join order -> Member
	bMember      = []byte("membership")   // decision id -> cluster id
	bReview      = []byte("needs_review") // decision id -> NeedsReview
	bErrors      = []byte("errors")       // decision id -> last evaluation error
	bEdge        = []byte("edge_pending") // decision id -> EdgeCaseDoc not yet written
	bReclusters  = []byte("rounds")       // time \x00 agent \x00 category -> ReclusterRecord (name kept on disk)
	bCorrections = []byte("corrections")  // feed seq -> Correction, as applied
	// bVectors keeps, with a remote index only, each clustered
	// decision's vector (little-endian float32s), so re-clustering needs no
	// round trip per vector; it came after version 3 without changing
	// it: a decision missing here is read from the index.
	bVectors = []byte("vectors") // decision id -> vector
	bMeta    = []byte("meta")

	kPosition = []byte("position") // last feed seq evaluated
	kIndexed  = []byte("indexed")  // vectors written to the index
	kVersion  = []byte("version")
)

// state is the evaluator's durable derived state, local to a replica.
type state struct {
	db *bolt.DB
	// untrack ends mapbound's hold on db's map.
	untrack func()
	// open indexes the needs-review records not resolved.
	open openReviews
	// evaluated is Options.OnEvaluated, reviewed Options.OnReviewed.
	evaluated func([]Evaluation)
	reviewed  func([]NeedsReview)
	// changes are the clusters written since the evidence cache last
	// read them (evidencecache.go).
	changes clusterChanges
}

func openState(path string) (*state, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open evaluator state: %w", err)
	}
	db, err := bolt.Open(path, 0o644, boltopt.Options())
	if err != nil {
		return nil, fmt.Errorf("open evaluator state %s: %w", path, err)
	}
	all := [][]byte{bEvals, bClusters, bMembers, bMember, bReview, bErrors, bEdge, bReclusters, bCorrections, bVectors, bPlacements}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(kVersion); v != nil && string(v) != stateVersion {
			for _, b := range all {
				if err := tx.DeleteBucket(b); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
					return err
				}
			}
			meta.Delete(kPosition)
			meta.Delete(kIndexed)
			meta.Delete(kPlaced)
		}
		for _, b := range all {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return meta.Put(kVersion, []byte(stateVersion))
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open evaluator state %s: %w", path, err)
	}
	if err := fillPlacements(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open evaluator state %s: %w", path, err)
	}
	st := &state{db: db}
	if err := st.open.load(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open evaluator state %s: %w", path, err)
	}
	st.untrack = mapbound.Track(db)
	return st, nil
}

func (s *state) close() error {
	s.untrack()
	return s.db.Close()
}

func u64(v []byte) uint64 {
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func putU64(b *bolt.Bucket, k []byte, v uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return b.Put(k, buf[:])
}

func (s *state) position() (pos, indexed uint64, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		pos, indexed = u64(m.Get(kPosition)), u64(m.Get(kIndexed))
		return nil
	})
	return pos, indexed, err
}

func getJSON[T any](s *state, bucket []byte, key string) (T, bool, error) {
	var v T
	var found bool
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket).Get([]byte(key))
		if b == nil {
			return nil
		}
		found = true
		return json.Unmarshal(b, &v)
	})
	return v, found, err
}

// eachJSON calls fn for every value of a bucket inside one read
// transaction; fn must not use the state itself (a nested transaction
// can deadlock with a writer that waits to grow the database).
func eachJSON[T any](s *state, bucket []byte, fn func(T) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(_, b []byte) error {
			var v T
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			return fn(v)
		})
	})
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put([]byte(key), data)
}

// commit is what one evaluated batch changes.
type commit struct {
	position    uint64
	indexed     uint64
	evaluations []Evaluation
	clusters    []*Cluster
	members     []memberRecord
	reviews     []NeedsReview
	edgeAdd     []EdgeCaseDoc
	edgeDone    []string
	clearErrors []string
	// dropClusters are deleted with their members before anything else
	// is written (a re-clustering pass rewrites its group's clusters whole).
	dropClusters []string
	reclusters   []ReclusterRecord
	// removeMembers are (cluster, decision) member records to delete.
	removeMembers [][2]string
	corrections   []Correction
	// correctionAt is the feed position the corrections are recorded
	// under (the position itself moves only with position).
	correctionAt uint64
	// vectors are kept in the state when the index is remote.
	vectors []vectorindex.Vector
}

// apply writes a commit in one transaction, then hands the evaluations
// and needs-review records it recorded to the OnEvaluated and OnReviewed
// hooks.
func (s *state) apply(c commit) error {
	s.changes.commit.Lock()
	err := s.write(c)
	if err == nil {
		s.changes.note(c)
	}
	s.changes.commit.Unlock()
	if err != nil {
		return err
	}
	s.open.written(c.reviews)
	if s.evaluated != nil && len(c.evaluations) > 0 {
		s.evaluated(c.evaluations)
	}
	if s.reviewed != nil && len(c.reviews) > 0 {
		s.reviewed(c.reviews)
	}
	return nil
}

func (s *state) write(c commit) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := dropClusters(tx, c.dropClusters); err != nil {
			return err
		}
		if err := removeMembers(tx, c.removeMembers); err != nil {
			return err
		}
		if len(c.vectors) > 0 {
			vb := tx.Bucket(bVectors)
			for _, v := range c.vectors {
				buf := make([]byte, 4*len(v.Embedding))
				for i, x := range v.Embedding {
					binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
				}
				if err := vb.Put([]byte(v.ID), buf); err != nil {
					return err
				}
			}
		}
		for _, corr := range c.corrections {
			key := binary.BigEndian.AppendUint64(nil, cmp.Or(c.correctionAt, c.position))
			data, err := json.Marshal(corr)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bCorrections).Put(key, data); err != nil {
				return err
			}
		}
		for _, r := range c.reclusters {
			key := r.At.UTC().Format(time.RFC3339Nano) + "\x00" + r.Agent + "\x00" + r.Category
			if err := putJSON(tx.Bucket(bReclusters), key, r); err != nil {
				return err
			}
		}
		evals, clusters, review := tx.Bucket(bEvals), tx.Bucket(bClusters), tx.Bucket(bReview)
		errs, edge, meta := tx.Bucket(bErrors), tx.Bucket(bEdge), tx.Bucket(bMeta)
		placements := tx.Bucket(bPlacements)
		for _, e := range c.evaluations {
			if err := putJSON(evals, e.DecisionID, e); err != nil {
				return err
			}
			if err := placements.Put([]byte(e.DecisionID), placementValue(e)); err != nil {
				return err
			}
		}
		for _, cl := range c.clusters {
			if err := putJSON(clusters, cl.ID, cl); err != nil {
				return err
			}
		}
		members, membership := tx.Bucket(bMembers), tx.Bucket(bMember)
		for _, m := range c.members {
			data, err := json.Marshal(m.Member)
			if err != nil {
				return err
			}
			if err := members.Put(memberKey(m.ClusterID, m.Seq), data); err != nil {
				return err
			}
			if err := membership.Put([]byte(m.DecisionID), []byte(m.ClusterID)); err != nil {
				return err
			}
		}
		for _, r := range c.reviews {
			if err := putJSON(review, r.DecisionID, r); err != nil {
				return err
			}
		}
		for _, d := range c.edgeAdd {
			if err := putJSON(edge, d.DecisionID, d); err != nil {
				return err
			}
		}
		for _, id := range c.edgeDone {
			if err := edge.Delete([]byte(id)); err != nil {
				return err
			}
		}
		for _, id := range c.clearErrors {
			if err := errs.Delete([]byte(id)); err != nil {
				return err
			}
		}
		if c.position > 0 {
			if err := putU64(meta, kPosition, c.position); err != nil {
				return err
			}
		}
		if c.indexed > 0 {
			if err := putU64(meta, kIndexed, c.indexed); err != nil {
				return err
			}
		}
		return nil
	})
}

// dropClusters deletes clusters and their member records.
func dropClusters(tx *bolt.Tx, ids []string) error {
	members := tx.Bucket(bMembers)
	for _, id := range ids {
		if err := tx.Bucket(bClusters).Delete([]byte(id)); err != nil {
			return err
		}
		prefix := append([]byte(id), 0)
		c := members.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := members.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeMembers deletes single member records, found by decision id.
func removeMembers(tx *bolt.Tx, pairs [][2]string) error {
	members := tx.Bucket(bMembers)
	for _, p := range pairs {
		prefix := append([]byte(p[0]), 0)
		c := members.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var m Member
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			if m.DecisionID == p[1] {
				if err := members.Delete(k); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// memberRecord is a member to store under its cluster, in join order.
type memberRecord struct {
	ClusterID string
	Seq       int
	Member
}

func memberKey(clusterID string, seq int) []byte {
	k := make([]byte, 0, len(clusterID)+9)
	k = append(k, clusterID...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

// clusterOf returns the cluster a decision belongs to, if any.
func (s *state) clusterOf(decisionID string) (string, error) {
	var id string
	err := s.db.View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bMember).Get([]byte(decisionID)))
		return nil
	})
	return id, err
}

// members returns a cluster's members in join order, from the from-th
// (1-based) on.
func (s *state) members(clusterID string, from int) ([]Member, error) {
	var out []Member
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bMembers).Cursor()
		k, v := c.Seek(memberKey(clusterID, max(from, 1)))
		var err error
		out, err = readMembers(c, k, v, clusterID, 0)
		return err
	})
	return out, err
}

// memberPage reads limit members of a cluster (all when limit is 0)
// from position offset in join order; the members before offset are
// skipped by key, unread.
func (s *state) memberPage(clusterID string, offset, limit int) ([]Member, error) {
	var out []Member
	prefix := append([]byte(clusterID), 0)
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bMembers).Cursor()
		k, v := c.Seek(prefix)
		for i := 0; i < offset && k != nil && bytes.HasPrefix(k, prefix); i++ {
			k, v = c.Next()
		}
		var err error
		out, err = readMembers(c, k, v, clusterID, limit)
		return err
	})
	return out, err
}

// readMembers decodes a cluster's members from the cursor's position
// (k, v) on, at most limit of them (all when limit is 0).
func readMembers(c *bolt.Cursor, k, v []byte, clusterID string, limit int) ([]Member, error) {
	var out []Member
	prefix := append([]byte(clusterID), 0)
	for ; k != nil && bytes.HasPrefix(k, prefix) && (limit <= 0 || len(out) < limit); k, v = c.Next() {
		var m Member
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// eachMembership calls fn for every clustered decision.
func (s *state) eachMembership(fn func(decisionID, clusterID string) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bMember).ForEach(func(k, v []byte) error { return fn(string(k), string(v)) })
	})
}

// setIndexed records how many vectors the index should hold.
func (s *state) setIndexed(n uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error { return putU64(tx.Bucket(bMeta), kIndexed, n) })
}

// recordErrors keeps why decisions could not be evaluated, for the API.
func (s *state) recordErrors(ids []string, msg string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bErrors)
		for _, id := range ids {
			if err := b.Put([]byte(id), []byte(msg)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *state) evaluationError(id string) (string, error) {
	var msg string
	err := s.db.View(func(tx *bolt.Tx) error {
		msg = string(tx.Bucket(bErrors).Get([]byte(id)))
		return nil
	})
	return msg, err
}

// vectors returns the stored vectors of ids (those it has).
func (s *state) vectors(ids []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bVectors)
		for _, id := range ids {
			raw := b.Get([]byte(id))
			if raw == nil || len(raw)%4 != 0 {
				continue
			}
			v := make([]float32, len(raw)/4)
			for i := range v {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			out[id] = v
		}
		return nil
	})
	return out, err
}
