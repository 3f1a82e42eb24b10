package topology

import (
	"go/token"
	"regexp"
	"strconv"
	"strings"
)

// The Lua side of the slot check: a script may touch only the keys its
// caller passes in KEYS.

var (
	luaCall     = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]\s*(?:,\s*([^,)]+))?`)
	luaKeysIdx  = regexp.MustCompile(`KEYS\[(\d+)\]`)
	luaKeyArg   = regexp.MustCompile(`^KEYS\[\d+\]$`)
	luaKeysLoop = regexp.MustCompile(`for\s+\w+\s*,\s*(\w+)\s+in\s+ipairs\(\s*KEYS\s*\)`)
	luaKeysVar  = regexp.MustCompile(`local\s+(\w+)\s*=\s*KEYS\[\d+\]`)
)

// keylessLua are commands whose first argument is not a key.
var keylessLua = map[string]bool{"TIME": true, "PING": true, "ECHO": true, "PUBLISH": true, "SCRIPT": true, "INFO": true}

// checkLua wants every redis.call's key to come from KEYS, and returns
// the highest KEYS index the script reads.
func (p *pkgCheck) checkLua(pos token.Pos, name, src string) int {
	bound := map[string]bool{}
	for _, m := range luaKeysLoop.FindAllStringSubmatch(src, -1) {
		bound[m[1]] = true
	}
	for _, m := range luaKeysVar.FindAllStringSubmatch(src, -1) {
		bound[m[1]] = true
	}
	for _, m := range luaCall.FindAllStringSubmatch(src, -1) {
		cmd, arg := strings.ToUpper(m[1]), strings.TrimSpace(m[2])
		if keylessLua[cmd] || arg == "" {
			continue
		}
		if !luaKeyArg.MatchString(arg) && !bound[arg] {
			p.problem(pos, "script %s: redis.call('%s', %s): a script may only touch the keys it is given in KEYS (a cluster routes it by them); pass this key in KEYS", name, m[1], arg)
		}
	}
	hi := 0
	for _, m := range luaKeysIdx.FindAllStringSubmatch(src, -1) {
		if n, _ := strconv.Atoi(m[1]); n > hi {
			hi = n
		}
	}
	return hi
}
