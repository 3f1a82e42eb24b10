package testsvc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP fault proxy on loopback: clients dial Addr and reach the
// target through it, and the test injects the network's faults: latency,
// connection resets, a link that stops carrying bytes, refused
// connections. It is hand-written (toxiproxy's server pulls a metrics and
// logging stack into the module for the four faults used here) and it
// keeps every fault in the test's process, so the test knows exactly when
// one is in force.
type Proxy struct {
	Addr   string // 127.0.0.1:PORT, what clients dial
	target string
	ln     net.Listener

	mu      sync.Mutex
	cond    *sync.Cond // signalled when frozen becomes false
	latency time.Duration
	frozen  bool
	refuse  bool
	conns   map[*net.TCPConn]struct{}
	trigger []byte        // FreezeOn's pattern, nil when none
	fired   chan struct{} // closed when trigger was seen
	closed  bool
	resets  int
}

// StartProxy listens on a free 127.0.0.1 port and forwards every
// connection to target (host:port); it is closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fault proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[*net.TCPConn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// SetLatency delays every chunk of bytes, in each direction, by d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Reset closes every open connection with a TCP reset (both sides see
// "connection reset by peer"), as a NAT or load balancer dropping its
// table would. It returns how many connections it reset.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		c.SetLinger(0) // close sends RST, not FIN
		c.Close()
		delete(p.conns, c)
		n++
	}
	p.resets += n
	return n / 2
}

// Resets is how many connections Reset has cut so far.
func (p *Proxy) Resets() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resets / 2
}

// Refuse makes new connections fail at once (reset on accept) while on,
// as a server that is down looks to its clients.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// Freeze stops carrying bytes in both directions; connections stay open,
// and senders block once the kernel's buffers are full.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Thaw carries bytes again (Freeze's, or FreezeOn's).
func (p *Proxy) Thaw() {
	p.mu.Lock()
	p.frozen = false
	p.trigger = nil
	p.cond.Broadcast()
	p.mu.Unlock()
}

// FreezeOn freezes the proxy as soon as a client sends pattern (before it
// is forwarded), and closes the returned channel then: e.g. the first
// "PUT /bucket/blobs/" a worker sends is the start of its upload.
func (p *Proxy) FreezeOn(pattern string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger = []byte(pattern)
	p.fired = make(chan struct{})
	return p.fired
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
	p.ln.Close()
	p.Reset()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c.(*net.TCPConn))
	}
}

func (p *Proxy) handle(client *net.TCPConn) {
	p.mu.Lock()
	refuse := p.refuse
	p.mu.Unlock()
	if refuse {
		client.SetLinger(0)
		client.Close()
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The target is down: the client sees a reset, as it would
		// dialling the target itself.
		client.SetLinger(0)
		client.Close()
		return
	}
	server := up.(*net.TCPConn)
	if !p.track(client, server) {
		client.Close()
		server.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, true); done <- struct{}{} }()
	go func() { p.pipe(client, server, false); done <- struct{}{} }()
	<-done
	// One side ended: end the other, so neither end waits on a half-open
	// connection.
	client.Close()
	server.Close()
	<-done
	p.untrack(client, server)
}

func (p *Proxy) track(cs ...*net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...*net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

// pipe copies src to dst chunk by chunk, holding each chunk while the proxy
// is frozen and for the latency. fromClient marks the direction FreezeOn
// watches; tail keeps the end of the previous chunk so that a pattern split
// across two reads is still seen.
func (p *Proxy) pipe(dst, src *net.TCPConn, fromClient bool) {
	buf := make([]byte, 32<<10)
	var tail []byte
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if fromClient {
				tail = p.watch(tail, chunk)
			}
			if !p.hold() {
				return
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				dst.CloseWrite()
			}
			return
		}
	}
}

// watch fires FreezeOn's trigger when chunk (after tail) holds its pattern,
// and returns the new tail.
func (p *Proxy) watch(tail, chunk []byte) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.trigger == nil {
		return nil
	}
	seen := append(tail, chunk...)
	if bytes.Contains(seen, p.trigger) {
		p.frozen = true
		p.trigger = nil
		close(p.fired)
		return nil
	}
	keep := len(p.trigger) - 1
	if len(seen) > keep {
		seen = seen[len(seen)-keep:]
	}
	return append([]byte(nil), seen...)
}

// hold waits while the proxy is frozen, then for the latency; false when
// the proxy was closed meanwhile.
func (p *Proxy) hold() bool {
	p.mu.Lock()
	for p.frozen && !p.closed {
		p.cond.Wait()
	}
	closed, d := p.closed, p.latency
	p.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return !closed
}
