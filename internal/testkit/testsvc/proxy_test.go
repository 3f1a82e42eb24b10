package testsvc_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, line string) (string, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	return got, err
}

func TestProxyFaults(t *testing.T) {
	p := testsvc.StartProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "hello"); err != nil || got != "hello\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	roundTrip(t, c, "slow")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("round trip took %v with 100ms each way", d)
	}
	p.SetLatency(0)

	if n := p.Reset(); n != 1 {
		t.Fatalf("Reset cut %d connections, want 1", n)
	}
	if _, err := roundTrip(t, c, "after reset"); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("after a reset: %v, want connection reset", err)
	}

	// FreezeOn holds the matching bytes until Thaw.
	c2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fired := p.FreezeOn("PUT /")
	c2.Write([]byte("PUT /x\n"))
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("FreezeOn never fired")
	}
	c2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c2.Read(make([]byte, 16)); err == nil {
		t.Fatalf("read %d bytes through a frozen proxy", n)
	}
	p.Thaw()
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := bufio.NewReader(c2).ReadString('\n'); err != nil || got != "PUT /x\n" {
		t.Fatalf("after Thaw: %q, %v", got, err)
	}

	p.Refuse(true)
	c3, err := net.Dial("tcp", p.Addr)
	if err == nil {
		if _, err = roundTrip(t, c3, "refused"); err == nil {
			t.Fatal("a connection went through while the proxy refused")
		}
		c3.Close()
	}
}

func TestOwnRedisRestarts(t *testing.T) {
	r := testsvc.OwnRedis(t, testsvc.RedisOptions{Persist: true})
	set := func() {
		c, err := net.Dial("tcp", r.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got, err := roundTrip(t, c, "SET k v"); err != nil || got != "+OK\r\n" {
			t.Fatalf("SET: %q, %v", got, err)
		}
	}
	get := func() string {
		c, err := net.Dial("tcp", r.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		got, err := roundTrip(t, c, "EXISTS k")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	set()
	r.Kill()
	if _, err := net.Dial("tcp", r.Addr); err == nil {
		t.Fatal("redis-server answers after Kill")
	}
	r.Start()
	if got := get(); got != ":1\r\n" {
		t.Fatalf("after a kill and restart with persistence: EXISTS k = %q, want :1", got)
	}
}

// TestOwnRedisPassword: with a Password, a client that has not
// authenticated is refused, AUTH with it lets the client in, and the URL
// carries it (a client given only the URL authenticates).
func TestOwnRedisPassword(t *testing.T) {
	r := testsvc.OwnRedis(t, testsvc.RedisOptions{Password: "s3cret-for-keda"})
	c, err := net.Dial("tcp", r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, step := range []struct{ send, wantPrefix string }{
		{"SET k v", "-NOAUTH"},
		{"AUTH wrong", "-WRONGPASS"},
		{"AUTH " + r.Password, "+OK"},
		{"SET k v", "+OK"},
	} {
		got, err := roundTrip(t, c, step.send)
		if err != nil || !strings.HasPrefix(got, step.wantPrefix) {
			t.Fatalf("%s: %q, %v; want %s…", step.send, got, err, step.wantPrefix)
		}
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := u.User.Password(); pw != r.Password || u.Host != r.Addr {
		t.Errorf("URL %s: want the password and %s in it", r.URL, r.Addr)
	}
}
