package web

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode"

	"github.com/tunefleet/tunefleet/internal/clip"
)

// Hosts decides which Host headers (and Origins) the server answers, so
// that a page of another site cannot reach it through DNS rebinding: a
// name the attacker controls, pointed at 127.0.0.1, reaches the socket,
// but it names itself in Host, and is refused.
//
//   - loopback literals (127.0.0.0/8, ::1) and "localhost" are always
//     allowed: only this machine's own pages can send them;
//   - Allowed (--allowed-hosts) adds names, e.g. the name an ingress or a
//     reverse proxy passes;
//   - the host of the listen address is allowed when it is a name or a
//     specific IP;
//   - a wildcard listen address (":8080", "0.0.0.0:8080") with credentials
//     and no Allowed allows any Host: the name clients use is unknowable
//     there, and every request must carry the credentials, which a browser
//     never sends to another site's origin. Without credentials a wildcard
//     is refused by CheckListen anyway.
type Hosts struct {
	Allowed []string // lower-case host names or IPs, without ports
	Listen  string   // the --listen address
	anyHost bool
}

// NewHosts checks --allowed-hosts (names or IPs, no ports or schemes) and
// resolves the rule for a listen address under auth.
func NewHosts(allowed []string, listen string, a Auth) (Hosts, error) {
	h := Hosts{Listen: listen}
	for _, name := range allowed {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if strings.ContainsAny(name, "/:@ ") && net.ParseIP(name) == nil {
			return Hosts{}, fmt.Errorf("--allowed-hosts %q: want host names or IPs, without scheme or port", clip.Counted(name, clip.Echo))
		}
		h.Allowed = append(h.Allowed, strings.Trim(name, "[]"))
	}
	host, _, err := net.SplitHostPort(listen)
	if err == nil && isWildcard(host) && a.Enabled() && len(h.Allowed) == 0 {
		h.anyHost = true
	}
	return h, nil
}

func isWildcard(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// allows reports whether a Host header (host[:port]) names this server.
func (h Hosts) allows(hostport string) bool {
	if h.anyHost {
		return true
	}
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "" {
		return false
	}
	if IsLoopback(host) {
		return true
	}
	for _, a := range h.Allowed {
		if host == a {
			return true
		}
	}
	if lh, _, err := net.SplitHostPort(h.Listen); err == nil && !isWildcard(lh) && strings.EqualFold(strings.Trim(lh, "[]"), host) {
		return true
	}
	return false
}

// MinTokenLen is the shortest bearer token accepted: a guessable one would
// make the check worthless.
const MinTokenLen = 16

// ErrWeakToken marks a token too short or too regular to be secret.
var ErrWeakToken = errors.New("weak web token")

// checkToken refuses a token that is not a secret: short, with spaces
// (" " set by mistake), or with too few distinct characters ("aaaa…").
func checkToken(tok string) error {
	distinct := map[rune]bool{}
	for _, r := range tok {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: $%s has spaces or control characters; use e.g. $(openssl rand -hex 16)", ErrWeakToken, TokenEnv)
		}
		distinct[r] = true
	}
	if len(tok) < MinTokenLen || len(distinct) < 8 {
		return fmt.Errorf("%w: $%s must be at least %d random-looking characters (it has %d, %d distinct); use e.g. $(openssl rand -hex 16)",
			ErrWeakToken, TokenEnv, MinTokenLen, len(tok), len(distinct))
	}
	return nil
}
