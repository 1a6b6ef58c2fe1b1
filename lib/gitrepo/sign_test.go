package gitrepo

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestSignedCommitsVerifyAndForgedOnesDoNot(t *testing.T) {
	key := bytes.Repeat([]byte("k"), MinSigningKey)
	signer, err := NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSigner(key[:MinSigningKey-1]); err == nil {
		t.Fatal("a short key was accepted")
	}
	r := openTemp(t, Options{Signer: signer})
	plain := write(t, r, "main", "no trailers", Change{Path: "a", Data: []byte("a")})
	withTrailers, err := r.Update(t.Context(), "main", func(*Snapshot) (*CommitSpec, error) {
		return &CommitSpec{Message: "Approve p-1", Trailers: []Trailer{{Key: "Approved-by", Value: "alice"}}, Changes: []Change{{Path: "b", Data: []byte("b")}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []Hash{plain, withTrailers} {
		c, err := r.CommitInfo(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := signer.Verify(c); err != nil {
			t.Errorf("%s: %v\n%s", c.Subject, err, c.Message)
		}
		if got := c.Trailer(SignatureTrailer); !strings.HasPrefix(got, "v1 ") {
			t.Errorf("%s: signature trailer %q", c.Subject, got)
		}
	}
	// git reads the trailers as trailers.
	if got := gitCLI(t, r.Path(), "log", "-1", "--format=%(trailers:key=Approved-by,valueonly)", withTrailers.String()); got != "alice" {
		t.Errorf("git reads Approved-by as %q", got)
	}

	// A commit made with the git CLI, a copied signature on other content,
	// and another key's signature are all refused.
	other, _ := NewSigner(bytes.Repeat([]byte("o"), MinSigningKey))
	c, _ := r.CommitInfo(withTrailers)
	if err := other.Verify(c); !errors.Is(err, errBadSignature) {
		t.Errorf("another key: %v", err)
	}
	forged := c
	forged.Tree = plain // other content, same message and signature
	if err := signer.Verify(forged); !errors.Is(err, errBadSignature) {
		t.Errorf("copied signature: %v", err)
	}
	forged = c
	forged.Message = strings.Replace(c.Message, "alice", "mallory", 1)
	if err := signer.Verify(forged); !errors.Is(err, errBadSignature) {
		t.Errorf("edited trailer: %v", err)
	}
	unsigned := openTemp(t, Options{})
	u, _ := unsigned.CommitInfo(write(t, unsigned, "main", "by hand", Change{Path: "a", Data: []byte("a")}))
	if err := signer.Verify(u); !errors.Is(err, errUnsigned) {
		t.Errorf("unsigned: %v", err)
	}
}
