package precept

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Role is what an API caller may do. Roles are ordered: each includes the
// ones below it.
type Role int

// Roles, from least to most privileged.
const (
	RoleNone Role = iota
	// RoleReader reads feedback, evaluations, rules and prompts.
	RoleReader
	// RoleRecorder also records decisions.
	RoleRecorder
	// RoleApprover also proposes, approves, rejects and rolls back rules.
	RoleApprover
	// RoleAdmin may do everything.
	RoleAdmin
)

var roleNames = map[Role]string{
	RoleReader:   "reader",
	RoleRecorder: "recorder",
	RoleApprover: "approver",
	RoleAdmin:    "admin",
}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return "none"
}

// ParseRole parses a role name as written in configuration.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("unknown role %q (want reader, recorder, approver or admin)", s)
}

// Identity is an authenticated caller: who they are and what they may do.
// Approvals record Name.
type Identity struct {
	Name string
	Role Role
}

// Allows reports whether the identity's role includes want.
func (id Identity) Allows(want Role) bool { return id.Role >= want }

// Credential is one API token as the server keeps it: the identity it
// authenticates and the token's digest (TokenDigest), never the token.
type Credential struct {
	Identity Identity
	// Digest is the SHA-256 of the token in lower-case hex.
	Digest string
}

// TokenDigest returns the SHA-256 of a token in lower-case hex: how
// tokens are compared, and how they may be written in configuration.
func TokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

type identityKey struct{}

// WithIdentity returns a context carrying the caller's identity.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the caller's identity, if the context carries one.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
