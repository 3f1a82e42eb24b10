package testsvc_test

import (
	"net"
	"net/url"
	"os"
	"testing"

	"github.com/tunefleet/tunefleet/artifacts"
	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
)

func TestRedis(t *testing.T) {
	var addr string
	t.Run("start", func(t *testing.T) {
		u, err := url.Parse(testsvc.Redis(t))
		if err != nil {
			t.Fatal(err)
		}
		addr = u.Host
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 7)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("PING answered %q, %v", buf[:n], err)
		}
	})
	if addr == "" || os.Getenv("REDIS_URL") != "" {
		return
	}
	// The subtest's cleanup stopped its server.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("redis-server at %s still answers after its test ended", addr)
	}
}

func TestS3(t *testing.T) {
	srv := testsvc.StartS3(t)
	a, b := srv.Bucket(t), srv.Bucket(t)
	if a.Bucket == b.Bucket {
		t.Fatalf("two Bucket calls gave the same bucket %q", a.Bucket)
	}
	for _, cfg := range []artifacts.S3Config{a, b, testsvc.S3(t)} {
		s, err := artifacts.NewS3(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Check(t.Context()); err != nil {
			t.Fatalf("Check of a fresh test bucket: %v", err)
		}
	}
}
