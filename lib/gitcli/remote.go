package gitcli

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
)

// networkConfig is given to every git command that talks to the remote
// (docs/instructions.md, "Credentials"): no redirect is followed, so the
// credentials never reach a host the remote sends git to, and a transfer
// slower than 1000 bytes/s for 60 s is abandoned instead of hanging.
var networkConfig = []string{
	"-c", "http.followRedirects=false",
	"-c", "http.lowSpeedLimit=1000",
	"-c", "http.lowSpeedTime=60",
}

// sshOptions bound an SSH remote that stops answering: 30 s to connect,
// and a keepalive every 15 s, four unanswered of which end the session.
const sshOptions = "-o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4"

// credentialHelper answers git's credential requests from the
// environment of the git process alone, so the secret is never on a
// command line (neither ps nor an error message shows it), and only for
// the remote's own protocol and host: a request for any other host gets
// no answer.
const credentialHelper = `!f() { test "$1" = get || return 0; p=; h=; ` +
	`while IFS= read -r l; do case "$l" in "") break;; protocol=*) p=${l#protocol=};; host=*) h=${l#host=};; esac; done; ` +
	`if test -n "$p" && test "$p" = "$PRECEPT_GIT_PROTOCOL" && test "$h" = "$PRECEPT_GIT_HOST"; then ` +
	`printf 'username=%s\npassword=%s\n' "$PRECEPT_GIT_USERNAME" "$PRECEPT_GIT_PASSWORD"; fi; }; f`

// CheckURL refuses a remote URL precept must not use: one holding a
// password (git would carry it in its process arguments, which any
// local user can read), and a plain http:// URL to a host other than
// loopback when token says credentials will be sent (they would cross
// the network in clear). The error never quotes the password.
func CheckURL(raw string, token bool) error {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil // a path or an scp-like SSH address: no password, no HTTP
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("remote URL %s://%s: cannot be parsed", scheme, RedactURL(rest))
	}
	if _, has := u.User.Password(); has {
		return fmt.Errorf("remote URL %s: holds a password, which git would show in its process arguments; "+
			"remove it and give it as the token (from the environment or a token file, docs/instructions.md)", RedactURL(raw))
	}
	if token && strings.EqualFold(u.Scheme, "http") && !isLoopback(u.Hostname()) {
		return fmt.Errorf("remote URL %s: plain http would send the token in clear; use https (plain http is allowed only to a loopback host)", RedactURL(raw))
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// credentialScope is the protocol and host (with its port, as git
// names it) of an HTTP(S) remote; empty for any other remote.
func credentialScope(raw string) [2]string {
	u, err := url.Parse(raw)
	if err != nil || !strings.Contains(raw, "://") {
		return [2]string{}
	}
	return [2]string{strings.ToLower(u.Scheme), u.Host}
}

// credentials are the git options and environment variables that give
// the credentials to a command talking to the remote.
func (c *Clone) credentials() (config, env []string) {
	if c.auth.Password != "" && c.scope[0] != "" {
		user := c.auth.Username
		if user == "" {
			user = "precept"
		}
		// An empty helper first clears the user's helpers, so a stored
		// credential cannot shadow the one given.
		config = append(config, "-c", "credential.helper=", "-c", "credential.helper="+credentialHelper)
		env = append(env, "PRECEPT_GIT_USERNAME="+user, "PRECEPT_GIT_PASSWORD="+c.auth.Password,
			"PRECEPT_GIT_PROTOCOL="+c.scope[0], "PRECEPT_GIT_HOST="+c.scope[1])
	}
	if c.auth.SSHKeyPath != "" {
		env = append(env, "GIT_SSH_COMMAND=ssh -o IdentitiesOnly=yes -o BatchMode=yes "+sshOptions+" -i "+shellQuote(c.auth.SSHKeyPath))
	}
	return config, env
}

// gitEnviron is this process's environment without precept's own
// secrets (tokens, passwords, secrets, telemetry headers): git and the
// helpers it starts never see them.
func gitEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if isSecretName(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isSecretName(name string) bool {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "PRECEPT_") {
		return false
	}
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "HEADERS", "SALT", "KEY"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
