package redistally

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Key is one row of a tally: who sent what. Inner is "" for the command a
// client sent, and the command's name for one a script (What) ran.
type Key struct {
	// Sender is the connection's name ("unnamed" when it set none, or
	// opened before the tally started).
	Sender string
	// What is the command with the pattern of its first key
	// ("hset tunefleet:run:{*}:progress"), or for a script "evalsha NAME"
	// (Names) or "evalsha KEY,KEY,…" (its keys' patterns; eval for its
	// first run, after an EVALSHA that answered NOSCRIPT).
	What  string
	Inner string
}

// Counts are the commands of one stretch of time, by Key.
type Counts map[Key]int64

// Total is every command counted, a script's inner ones included (what
// INFO commandstats counts).
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Without is c less the rows whose sender is one of senders.
func (c Counts) Without(senders ...string) Counts {
	out := Counts{}
	for k, v := range c {
		if !slices.Contains(senders, k.Sender) {
			out[k] = v
		}
	}
	return out
}

// Of is the rows of c whose sender is sender.
func (c Counts) Of(sender string) Counts {
	out := Counts{}
	for k, v := range c {
		if k.Sender == sender {
			out[k] = v
		}
	}
	return out
}

// Add is c with d's counts added (c is changed).
func (c Counts) Add(d Counts) Counts {
	for k, v := range d {
		c[k] += v
	}
	return c
}

// ByCommand sums c by command name as Redis counts it (a script's inner
// commands under their own names, lowercase): commandstats' view.
func (c Counts) ByCommand() map[string]int64 {
	out := map[string]int64{}
	for k, v := range c {
		name := k.Inner
		if name == "" {
			name, _, _ = strings.Cut(k.What, " ")
		}
		out[strings.ToLower(name)] += v
	}
	return out
}

// Names names scripts by the patterns of their keys (comma-separated, as
// What shows an unnamed one); a caller may add its own.
var Names = map[string]string{
	// asynq v0.26's scripts (internal/rdb).
	"asynq:{*}:t:*,asynq:{*}:pending":                                                                                                              "asynq enqueue",
	"asynq:{*}:pending,asynq:{*}:paused,asynq:{*}:active,asynq:{*}:lease":                                                                          "asynq dequeue",
	"asynq:{*}:active,asynq:{*}:lease,asynq:{*}:t:*,asynq:{*}:processed:*,asynq:{*}:processed":                                                     "asynq done",
	"asynq:{*}:active,asynq:{*}:lease,asynq:{*}:completed,asynq:{*}:t:*,asynq:{*}:processed:*,asynq:{*}:processed":                                 "asynq mark complete",
	"asynq:{*}:active,asynq:{*}:lease,asynq:{*}:pending,asynq:{*}:t:*":                                                                             "asynq requeue",
	"asynq:{*}:t:*,asynq:{*}:scheduled":                                                                                                            "asynq schedule",
	"asynq:{*}:t:*,asynq:{*}:active,asynq:{*}:lease,asynq:{*}:retry,asynq:{*}:processed:*,asynq:{*}:failed:*,asynq:{*}:processed,asynq:{*}:failed": "asynq retry",
	"asynq:{*}:scheduled,asynq:{*}:pending":                                                                                                        "asynq forward scheduled",
	"asynq:{*}:retry,asynq:{*}:pending":                                                                                                            "asynq forward retry",
	"asynq:{*}:completed":                                                                                                                          "asynq janitor",
	"asynq:{*}:lease":                                                                                                                              "asynq lease check",
	"asynq:servers:{*},asynq:workers:{*}":                                                                                                          "asynq heartbeat",
	"asynq:{*}:t:*,asynq:{*}:groups":                                                                                                               "asynq delete task",
	// tunefleet's (runstate).
	"tunefleet:run:{*},tunefleet:run:{*}:pending,tunefleet:run:{*}:graphs":                            "runstate Create",
	"tunefleet:run:{*},tunefleet:run:{*}:pending,tunefleet:run:{*}:graphs,tunefleet:run:{*}:attempts": "runstate Begin",
	"tunefleet:run:{*}:pending,tunefleet:run:{*}:graphs,tunefleet:run:{*},tunefleet:run:{*}:progress": "runstate CompleteGraph",
	"tunefleet:run:{*}:pending,tunefleet:run:{*}:graphs":                                              "runstate setPending",
	"tunefleet:run:{*}:pending,tunefleet:run:{*}":                                                     "runstate TaskState",
	"tunefleet:run:{*}:tuning,tunefleet:run:{*}:deaths":                                               "runstate BeginTuning",
	"tunefleet:run:{*}:tuning":   "runstate EndTuning",
	"tunefleet:run:{*}:progress": "runstate ClearProgress",
	"tunefleet:lock:*":           "runstate unlock",
	"tunefleet:run:{*},tunefleet:run:{*}:pending,tunefleet:run:{*}:graphs,tunefleet:run:{*}:handbacks,tunefleet:run:{*}:attempts,tunefleet:run:{*}:tuning,tunefleet:run:{*}:deaths,tunefleet:run:{*}:failing,tunefleet:run:{*}:progress": "runstate Finish",
}

// Tally reads one redis-server's MONITOR feed in the background.
type Tally struct {
	conn  net.Conn // the MONITOR connection
	ctl   net.Conn // what Cut sends its marks and INFO on
	ctlRd *bufio.Reader
	own   string // ctl's address, as the server names it

	mu     sync.Mutex
	counts Counts
	names  map[string]string // connection address → name
	last   Key               // the last top-level command, for a script's inner ones
	marks  map[string]chan struct{}
	stats  map[string]int64 // INFO commandstats at the last Cut
	err    error
	seq    int
	done   chan struct{}
}

// Start opens a MONITOR connection to the redis-server at addr
// (host:port) and counts from now on; the connections close with tb.
// Start it before the clients it is to name connect.
func Start(tb testing.TB, addr string) *Tally {
	tb.Helper()
	t, err := start(addr)
	if err != nil {
		tb.Fatalf("redistally: %v", err)
	}
	tb.Cleanup(t.Close)
	return t
}

func start(addr string) (*Tally, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s for MONITOR: %w", addr, err)
	}
	ctl, err := d.Dial("tcp", addr)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	t := &Tally{conn: conn, ctl: ctl, ctlRd: bufio.NewReader(ctl), own: ctl.LocalAddr().String(),
		counts: Counts{}, names: map[string]string{}, marks: map[string]chan struct{}{}, done: make(chan struct{})}
	rd := bufio.NewReaderSize(conn, 1<<20)
	if _, err := conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		t.Close()
		return nil, fmt.Errorf("MONITOR: %w", err)
	}
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Close()
		return nil, fmt.Errorf("MONITOR answered %q: %v", line, err)
	}
	go t.read(rd)
	return t, nil
}

// Close ends the tally's connections.
func (t *Tally) Close() {
	t.conn.Close()
	t.ctl.Close()
	<-t.done
}

// Cut returns what the server executed since the last Cut (or Start) and
// starts counting afresh. It sends a mark (ECHO) that the feed carries in
// the server's own order, and waits for it: every command the server ran
// before the mark is counted, none after. The tally's own commands are
// not counted.
//
// The mark goes in one transaction with an INFO commandstats, so that
// nothing runs between the reading and the mark: unseen is what Redis
// counted since the last Cut and the tally did not (by command; empty
// when MONITOR showed every command, as it does all but admin ones). The
// first Cut's unseen is everything before it.
func (t *Tally) Cut(ctx context.Context) (c Counts, unseen map[string]int64, err error) {
	t.mu.Lock()
	t.seq++
	mark := fmt.Sprintf("redistally:cut:%d", t.seq)
	seen := make(chan struct{})
	t.marks[mark] = seen
	t.mu.Unlock()
	t.ctl.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := t.ctl.Write([]byte(resp("MULTI") + resp("INFO", "commandstats") + resp("ECHO", mark) + resp("EXEC"))); err != nil {
		return nil, nil, fmt.Errorf("mark: %w", err)
	}
	var replies []any
	for range 4 {
		r, err := readReply(t.ctlRd)
		if err != nil {
			return nil, nil, fmt.Errorf("mark: %w", err)
		}
		replies = append(replies, r)
	}
	exec, ok := replies[3].([]any)
	if !ok || len(exec) != 2 {
		return nil, nil, fmt.Errorf("mark: EXEC answered %v", replies[3])
	}
	info, _ := exec[0].(string)
	stats := CommandStats(info)
	// A hang guard, not a time limit: the mark comes back within a
	// moment unless the server's MONITOR does not show it.
	hang := time.NewTimer(5 * time.Minute)
	defer hang.Stop()
	select {
	case <-seen:
	case <-t.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return nil, nil, fmt.Errorf("MONITOR feed ended: %v", t.err)
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-hang.C:
		return nil, nil, fmt.Errorf("the mark %s did not come back through MONITOR in 5 minutes (does this server show ECHO in a transaction?)", mark)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c = t.counts
	t.counts = Counts{}
	// Between two readings Redis counted, of the tally's own: the last
	// INFO (counted once it had run), its ECHO and EXEC, and this MULTI.
	own := map[string]int64{"info": 1, "echo": 1, "exec": 1, "multi": 1}
	unseen = map[string]int64{}
	by := c.ByCommand()
	for k, v := range stats {
		if d := v - t.stats[k] - by[k] - own[k]; d != 0 && t.stats != nil {
			unseen[k] = d
		}
	}
	t.stats = stats
	return c, unseen, nil
}

// CommandStats reads INFO commandstats: calls per command, lowercase.
func CommandStats(info string) map[string]int64 {
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

// resp is one command in RESP.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readReply reads one RESP2 reply: a string, an int64, an error or a
// slice of those.
func readReply(rd *bufio.Reader) (any, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, fmt.Errorf("redis: %s", line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, max(n, 0))
		for range n {
			r, err := readReply(rd)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return nil, fmt.Errorf("reply %q", line)
}

// read parses the feed until the connection closes.
func (t *Tally) read(rd *bufio.Reader) {
	defer close(t.done)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.mu.Lock()
			t.err = err
			t.mu.Unlock()
			return
		}
		addr, args, ok := parseLine(strings.TrimRight(line, "\r\n"))
		if !ok || len(args) == 0 {
			continue
		}
		t.mu.Lock()
		t.count(addr, args)
		t.mu.Unlock()
	}
}

// count records one command of the feed (mu held).
func (t *Tally) count(addr string, args []string) {
	cmd := strings.ToLower(args[0])
	if addr == "lua" {
		k := t.last
		k.Inner = cmd
		t.counts[k]++
		return
	}
	if addr == t.own {
		if cmd == "echo" && len(args) == 2 {
			if ch, ok := t.marks[args[1]]; ok {
				delete(t.marks, args[1])
				close(ch)
			}
		}
		t.last = Key{Sender: "redistally"}
		return
	}
	switch {
	case cmd == "hello":
		for i := 1; i+1 < len(args); i++ {
			if strings.EqualFold(args[i], "setname") {
				t.names[addr] = args[i+1]
			}
		}
	case cmd == "client" && len(args) == 3 && strings.EqualFold(args[1], "setname"):
		t.names[addr] = args[2]
	}
	sender := t.names[addr]
	if sender == "" {
		sender = "unnamed"
	}
	k := Key{Sender: sender, What: what(cmd, args)}
	t.counts[k]++
	t.last = k
}

// what names a command for its Key.
func what(cmd string, args []string) string {
	switch cmd {
	case "eval", "evalsha":
		if len(args) < 3 {
			return cmd
		}
		n, _ := strconv.Atoi(args[2])
		keys := make([]string, 0, n)
		for _, k := range args[3:min(3+n, len(args))] {
			keys = append(keys, Pattern(k))
		}
		// A script is known by its keys (EVAL, its first run, and the
		// EVALSHAs after it name the same ones).
		sig := strings.Join(keys, ",")
		if name, ok := Names[sig]; ok {
			return cmd + " " + name
		}
		return cmd + " " + sig
	case "client", "config", "script", "cluster", "command", "object", "memory":
		if len(args) > 1 {
			return cmd + " " + strings.ToLower(args[1])
		}
		return cmd
	case "hello", "ping", "info", "echo", "multi", "exec", "discard", "monitor", "select", "auth", "quit", "dbsize", "time":
		return cmd
	}
	if len(args) > 1 {
		return cmd + " " + Pattern(args[1])
	}
	return cmd
}

var (
	hashTag = regexp.MustCompile(`\{[^}]*\}`)
	taskID  = regexp.MustCompile(`(:t|:g|:unique|:processed|:failed|:scheduler_history):.*$`)
)

// Pattern is a key with what names one run, queue, task or day starred:
// "tunefleet:run:{R1}:graphs" → "tunefleet:run:{*}:graphs",
// "asynq:{q}:t:ID" → "asynq:{*}:t:*".
func Pattern(key string) string {
	if strings.HasPrefix(key, "tunefleet:lock:") {
		return "tunefleet:lock:*" // a lock names a store key
	}
	k := hashTag.ReplaceAllString(key, "{*}")
	return taskID.ReplaceAllString(k, "$1:*")
}

// parseLine reads one MONITOR line: `+TIME [DB ADDR] "arg" "arg" …`.
func parseLine(line string) (addr string, args []string, ok bool) {
	line = strings.TrimPrefix(line, "+")
	open := strings.IndexByte(line, '[')
	end := strings.IndexByte(line, ']')
	if open < 0 || end < open {
		return "", nil, false
	}
	_, addr, _ = strings.Cut(line[open+1:end], " ")
	rest := line[end+1:]
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return addr, args, true
		}
		if rest[0] != '"' {
			return "", nil, false
		}
		arg, n, ok := unquote(rest)
		if !ok {
			return "", nil, false
		}
		args = append(args, arg)
		rest = rest[n:]
	}
}

// unquote reads one of MONITOR's quoted arguments (sdscatrepr's escapes)
// from the start of s, returning it and the bytes it took.
func unquote(s string) (string, int, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, true
		case c != '\\':
			b.WriteByte(c)
		case i+1 >= len(s):
			return "", 0, false
		default:
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return "", 0, false
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return "", 0, false
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(s[i])
			}
		}
	}
	return "", 0, false
}
