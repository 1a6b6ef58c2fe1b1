package gitrepo

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SignatureTrailer is the trailer a Signer adds to every commit a
// repository writes. Whoever holds the key wrote the commit exactly as it
// is — its tree, its parents and its message — so a commit fetched from
// a remote can be told apart from one precept made (docs/decisions,
// "Trust model").
const SignatureTrailer = "Precept-Signature"

// signatureVersion prefixes the signature, so the scheme can change.
const signatureVersion = "v1"

// MinSigningKey is the shortest key a Signer accepts.
const MinSigningKey = 32

// Signer signs and verifies commits with an HMAC-SHA256 key shared by the
// replicas of one deployment.
type Signer struct {
	key []byte
}

// NewSigner returns a Signer for key, which must be at least
// MinSigningKey bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < MinSigningKey {
		return nil, fmt.Errorf("signing key: %d bytes, need at least %d", len(key), MinSigningKey)
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// sum is the signature of a commit with this tree, these parents and
// this message (without its signature trailer).
func (s *Signer) sum(tree Hash, parents []Hash, message string) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(m, "parent %s\n", p)
	}
	fmt.Fprintf(m, "\n%s", message)
	return signatureVersion + " " + hex.EncodeToString(m.Sum(nil))
}

// signed returns message with the signature trailer of a commit of tree
// and parents appended as its last trailer.
func (s *Signer) signed(tree Hash, parents []Hash, message string) string {
	sig := SignatureTrailer + ": " + s.sum(tree, parents, message) + "\n"
	if len(ParseTrailers(message)) == 0 {
		// A message without trailers starts a trailer block.
		return message + "\n" + sig
	}
	return message + sig
}

// errUnsigned and errBadSignature say why Verify refused a commit.
var (
	errUnsigned     = errors.New("not signed")
	errBadSignature = errors.New("signature does not match")
)

// Verify reports whether c was written, exactly as it is, by a holder of
// the key: nil when it was, else why not.
func (s *Signer) Verify(c CommitInfo) error {
	msg := c.Message
	i := strings.LastIndex(strings.TrimSuffix(msg, "\n"), "\n")
	last := strings.TrimSuffix(msg[i+1:], "\n")
	value, ok := strings.CutPrefix(last, SignatureTrailer+": ")
	if !ok || !strings.HasSuffix(msg, "\n") {
		return errUnsigned
	}
	unsigned := msg[:i+1]
	if len(ParseTrailers(unsigned)) == 0 {
		// signed added the blank line that opened the trailer block.
		unsigned = strings.TrimSuffix(unsigned, "\n")
	}
	if !hmac.Equal([]byte(value), []byte(s.sum(c.Tree, c.Parents, unsigned))) {
		return errBadSignature
	}
	return nil
}

// ErrNoSigner is returned by VerifyCommit when the repository has no
// Signer: then nothing fetched can be verified.
var ErrNoSigner = errors.New("the repository has no signing key")

// VerifyCommit reports whether commit h was written by a holder of the
// repository's signing key: nil when it was.
func (r *Repo) VerifyCommit(h Hash) error {
	if r.opts.Signer == nil {
		return ErrNoSigner
	}
	c, err := r.CommitInfo(h)
	if err != nil {
		return err
	}
	return r.opts.Signer.Verify(c)
}
