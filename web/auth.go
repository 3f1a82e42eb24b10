package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// The environment that carries credentials: never flags, which `ps` shows.
const (
	TokenEnv    = "TUNEFLEET_WEB_TOKEN"
	UserEnv     = "TUNEFLEET_WEB_USER"
	PasswordEnv = "TUNEFLEET_WEB_PASSWORD"
)

// Auth is what a request must carry. Zero: nothing.
type Auth struct {
	// Token is accepted as "Authorization: Bearer TOKEN", or as the
	// password of basic auth with any user name (what a browser can send).
	Token string
	// User and Password are accepted as basic auth.
	User, Password string
}

// ErrAuthEnv marks credentials in the environment that do not make sense.
var ErrAuthEnv = errors.New("bad web credentials")

// AuthFromEnv reads the credentials from getenv (os.Getenv).
func AuthFromEnv(getenv func(string) string) (Auth, error) {
	a := Auth{Token: getenv(TokenEnv), User: getenv(UserEnv), Password: getenv(PasswordEnv)}
	if (a.User == "") != (a.Password == "") {
		return Auth{}, fmt.Errorf("%w: set both $%s and $%s, or neither", ErrAuthEnv, UserEnv, PasswordEnv)
	}
	// A token of one space is a mistake to report, not a token an
	// attacker guesses at once.
	if a.Token != "" {
		if err := checkToken(a.Token); err != nil {
			return Auth{}, fmt.Errorf("%w: %w", ErrAuthEnv, err)
		}
	}
	return a, nil
}

// Enabled reports whether requests must authenticate.
func (a Auth) Enabled() bool { return a.Token != "" || a.User != "" }

// equal compares in constant time (hashing first: lengths leak nothing).
func equal(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func (a Auth) allows(r *http.Request) bool {
	if !a.Enabled() {
		return true
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return a.Token != "" && equal(tok, a.Token)
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	tokenOK := a.Token != "" && equal(pass, a.Token)
	userOK := a.User != "" && equal(user, a.User) && equal(pass, a.Password)
	return tokenOK || userOK
}

// ErrExposed marks a listen address off loopback without credentials.
var ErrExposed = errors.New("refusing to serve off loopback without authentication")

// CheckListen refuses a listen address that other machines can reach
// unless a has credentials: the UI shows every run, and links every log
// and engine. "localhost" and loopback IPs are loopback; an empty host
// (":8080") or any other name is not.
func CheckListen(addr string, a Auth) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, e.g. 127.0.0.1:8080: %w", addr, err)
	}
	if IsLoopback(host) || a.Enabled() {
		return nil
	}
	return fmt.Errorf("%w: --listen %s is reachable from other machines; set $%s (a bearer token) or $%s and $%s (basic auth)",
		ErrExposed, addr, TokenEnv, UserEnv, PasswordEnv)
}

// IsLoopback reports whether host names only this machine.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
