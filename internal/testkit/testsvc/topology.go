package testsvc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Redis topologies a fleet runs on besides one server: a Cluster
// (three masters with a replica each) and a Sentinel set (a master, a
// replica and three sentinels, quorum 2), every process on loopback and
// owned by the test that started it. Their URLs are the ones
// runstate.ConnectRedis (and so --redis) takes: redis+cluster://… and
// redis+sentinel://….

// SentinelMaster is the name the Sentinel set monitors its master under:
// the master_name of its URL.
const SentinelMaster = "tunefleet"

// RedisNode is one redis-server of a topology.
type RedisNode struct {
	Addr string // 127.0.0.1:PORT
	srv  *server
	// password is what Do authenticates with (requirepass), if any.
	password string
}

// Kill ends the node with SIGKILL, as a crash or a lost machine would.
func (n *RedisNode) Kill() { n.srv.kill() }

// Start starts a killed node again on its port and data directory.
func (n *RedisNode) Start() { n.srv.restart() }

// Do sends one command to the node (inline, no client library) and
// returns its reply's first line, "+OK", ":1" or a bulk string's text.
func (n *RedisNode) Do(ctx context.Context, args ...string) (string, error) {
	return redisDo(ctx, n.Addr, n.password, args...)
}

// RedisCluster is a Redis Cluster of three masters with one replica each.
type RedisCluster struct {
	// URL is redis+cluster://FIRST?addr=…&addr=… naming every node.
	URL   string
	Nodes []*RedisNode
}

// OwnRedisCluster starts six cluster-enabled redis-servers on loopback,
// joins them with `redis-cli --cluster create --cluster-replicas 1`, and
// waits until every node says cluster_state:ok and knows its role. Nothing
// is persisted; every node is stopped when the test ends.
func OwnRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that needs a Redis Cluster")
	}
	bin, cli := RedisServerBinary(), RedisCLIBinary()
	if bin == "" || cli == "" {
		Missing(t, "redis-server and redis-cli not found on PATH or in /usr/bin: install them with `apt-get install redis-server`")
	}
	c := &RedisCluster{}
	for i := 0; i < 6; i++ {
		// The cluster bus listens on a port of its own; the default
		// (PORT+10000) may lie past 65535 for a port the kernel picked.
		bus, err := freePort()
		if err != nil {
			t.Fatalf("redis cluster: finding a free port: %v", err)
		}
		c.Nodes = append(c.Nodes, startNode(t, bin, fmt.Sprintf("redis-cluster-%d", i), func(port int, dir string) []string {
			return serverArgs(port, dir, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "2000")
		}))
	}
	args := []string{"--cluster", "create"}
	var q []string
	for i, n := range c.Nodes {
		args = append(args, n.Addr)
		if i > 0 {
			q = append(q, "addr="+n.Addr)
		}
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.URL = "redis+cluster://" + c.Nodes[0].Addr + "?" + strings.Join(q, "&")
	c.WaitHealthy(t)
	return c
}

// WaitHealthy waits until every running node says cluster_state:ok and
// every master has a replica that knows it: a cluster that a client's
// first command (and a failover) finds whole.
func (c *RedisCluster) WaitHealthy(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	last := ""
	for {
		ok := true
		for _, n := range c.Nodes {
			info, err := n.Do(ctx, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok, last = false, fmt.Sprintf("%s: %q %v", n.Addr, firstLine(info), err)
				break
			}
		}
		if ok {
			if shards, err := c.Shards(ctx); err != nil || len(shards) != 3 {
				ok, last = false, fmt.Sprintf("shards %v: %v", shards, err)
			} else {
				for _, s := range shards {
					if s.Replica == "" {
						ok, last = false, fmt.Sprintf("master %s has no replica yet", s.Master)
						break
					}
					// A replica still syncing cannot take over.
					if info, err := c.node(s.Replica).Do(ctx, "INFO", "replication"); err != nil || !strings.Contains(info, "master_link_status:up") {
						ok, last = false, fmt.Sprintf("replica %s of %s not in sync yet (%v)", s.Replica, s.Master, err)
						break
					}
				}
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redis cluster not healthy within %s: %s", readyTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ClusterShard is one master of a cluster and its replica, by address.
type ClusterShard struct {
	Master, Replica string
	// MasterID and ReplicaID are their node ids.
	MasterID, ReplicaID string
	// Slots are the master's slot ranges, "0-5460".
	Slots []string
}

// Shards reads CLUSTER NODES from the first node that answers: the
// masters, each with its replica.
func (c *RedisCluster) Shards(ctx context.Context) ([]ClusterShard, error) {
	var text string
	var err error
	for _, n := range c.Nodes {
		if text, err = n.Do(ctx, "CLUSTER", "NODES"); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	type node struct{ id, addr, flags, master string }
	var nodes []node
	slots := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		nodes = append(nodes, node{id: f[0], addr: addr, flags: f[2], master: f[3]})
		slots[f[0]] = f[8:]
	}
	var out []ClusterShard
	for _, m := range nodes {
		if !strings.Contains(m.flags, "master") || strings.Contains(m.flags, "fail") || len(slots[m.id]) == 0 {
			continue
		}
		s := ClusterShard{Master: m.addr, MasterID: m.id, Slots: slots[m.id]}
		for _, r := range nodes {
			if r.master == m.id && !strings.Contains(r.flags, "fail") {
				s.Replica, s.ReplicaID = r.addr, r.id
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// ShardOf is the shard whose master serves key's slot.
func (c *RedisCluster) ShardOf(ctx context.Context, key string) (ClusterShard, error) {
	v, err := c.Nodes[0].Do(ctx, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return ClusterShard{}, err
	}
	slot, err := strconv.Atoi(strings.TrimPrefix(v, ":"))
	if err != nil {
		return ClusterShard{}, fmt.Errorf("CLUSTER KEYSLOT %s: %q", key, v)
	}
	shards, err := c.Shards(ctx)
	if err != nil {
		return ClusterShard{}, err
	}
	for _, s := range shards {
		for _, r := range s.Slots {
			lo, hi, _ := strings.Cut(r, "-")
			if hi == "" {
				hi = lo
			}
			a, _ := strconv.Atoi(lo)
			b, _ := strconv.Atoi(hi)
			if slot >= a && slot <= b {
				return s, nil
			}
		}
	}
	return ClusterShard{}, fmt.Errorf("no master serves slot %d (key %s)", slot, key)
}

// node is the node at addr.
func (c *RedisCluster) node(addr string) *RedisNode {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// Failover runs CLUSTER FAILOVER on the replica of the master serving
// key's slot (a manual failover: the replica catches up with its master,
// then takes its slots over) and waits until the replica is the master
// and the cluster is whole again. It returns the shard as it was.
func (c *RedisCluster) Failover(t testing.TB, key string) ClusterShard {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	s, err := c.ShardOf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if s.Replica == "" {
		t.Fatalf("master %s of key %s has no replica to fail over to", s.Master, key)
	}
	// A manual failover gives up after 5 s (CLUSTER_MF_TIMEOUT) when the
	// replica has not caught up with its master's offset by then, which a
	// loaded machine can make happen; it is asked again until it is done.
	var now ClusterShard
	for {
		if r, err := c.node(s.Replica).Do(ctx, "CLUSTER", "FAILOVER"); err != nil || r != "+OK" {
			t.Fatalf("CLUSTER FAILOVER on %s: %q %v", s.Replica, r, err)
		}
		retry := time.Now().Add(6 * time.Second)
		for time.Now().Before(retry) {
			now, err = c.ShardOf(ctx, key)
			if err == nil && now.Master == s.Replica {
				c.WaitHealthy(t)
				return s
			}
			select {
			case <-ctx.Done():
				t.Fatalf("replica %s did not take key %s's slot over from %s within %s (now %+v, %v)", s.Replica, key, s.Master, failoverTimeout, now, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// failoverTimeout bounds a manual failover, retries included.
const failoverTimeout = 2 * time.Minute

// RedisSentinelSet is a master, its replica and three sentinels
// monitoring it as SentinelMaster with quorum 2.
type RedisSentinelSet struct {
	// URL is redis+sentinel://SENTINEL/0?master_name=…&addr=…&addr=….
	URL       string
	Master    *RedisNode // as started; after a failover, Replica is the master
	Replica   *RedisNode
	Sentinels []*RedisNode
}

// RedisSentinelOptions are a Sentinel set's passwords: Password is the
// master's and the replica's (requirepass, masterauth; the sentinels'
// auth-pass), SentinelPassword the sentinels' own (requirepass,
// sentinel-pass). Empty: none.
type RedisSentinelOptions struct {
	Password, SentinelPassword string
}

// OwnRedisSentinel starts the set on loopback and waits until every
// sentinel knows the master, its replica and the other sentinels. The
// sentinels judge a master down after 1 s without an answer, so a
// failover takes a few seconds.
func OwnRedisSentinel(t testing.TB) *RedisSentinelSet {
	t.Helper()
	return OwnRedisSentinelWith(t, RedisSentinelOptions{})
}

// OwnRedisSentinelWith starts the set with passwords; its URL carries
// them as tunefleet's --redis does: the sentinels' in the user info, the
// master's as ?password=.
func OwnRedisSentinelWith(t testing.TB, o RedisSentinelOptions) *RedisSentinelSet {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping a test that needs Redis Sentinel")
	}
	bin := RedisServerBinary()
	if bin == "" {
		Missing(t, "redis-server not found on PATH or in /usr/bin: install it with `apt-get install redis-server`")
	}
	var auth []string
	if o.Password != "" {
		auth = []string{"--requirepass", o.Password, "--masterauth", o.Password}
	}
	s := &RedisSentinelSet{}
	s.Master = startNode(t, bin, "redis-master", func(port int, dir string) []string { return serverArgs(port, dir, auth...) })
	mhost, mport, _ := net.SplitHostPort(s.Master.Addr)
	s.Replica = startNode(t, bin, "redis-replica", func(port int, dir string) []string {
		return serverArgs(port, dir, append([]string{"--replicaof", mhost, mport}, auth...)...)
	})
	s.Master.password, s.Replica.password = o.Password, o.Password
	for i := 0; i < 3; i++ {
		n := startNode(t, bin, fmt.Sprintf("redis-sentinel-%d", i), func(port int, dir string) []string {
			// A sentinel rewrites its config file (what it learnt of the
			// set); a restart keeps that.
			conf := filepath.Join(dir, "sentinel.conf")
			if _, err := os.Stat(conf); err != nil {
				text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n"+
					"sentinel monitor %s %s %s 2\n"+
					"sentinel down-after-milliseconds %[3]s 1000\n"+
					"sentinel failover-timeout %[3]s 10000\n"+
					"sentinel parallel-syncs %[3]s 1\n", port, dir, SentinelMaster, mhost, mport)
				if o.Password != "" {
					text += fmt.Sprintf("sentinel auth-pass %s %s\n", SentinelMaster, o.Password)
				}
				if o.SentinelPassword != "" {
					text += fmt.Sprintf("requirepass %s\nsentinel sentinel-pass %[1]s\n", o.SentinelPassword)
				}
				os.WriteFile(conf, []byte(text), 0o600)
			}
			return []string{conf, "--sentinel", "--port", strconv.Itoa(port), "--daemonize", "no", "--loglevel", "notice"}
		})
		n.password = o.SentinelPassword
		s.Sentinels = append(s.Sentinels, n)
	}
	var q []string
	for _, n := range s.Sentinels[1:] {
		q = append(q, "addr="+n.Addr)
	}
	if o.Password != "" {
		q = append(q, "password="+url.QueryEscape(o.Password))
	}
	user := ""
	if o.SentinelPassword != "" {
		user = url.UserPassword("", o.SentinelPassword).String() + "@"
	}
	s.URL = "redis+sentinel://" + user + s.Sentinels[0].Addr + "/0?master_name=" + SentinelMaster + "&" + strings.Join(q, "&")
	s.waitKnown(t, s.Master.Addr)
	return s
}

// startNode starts one redis-server of a topology, named name in the
// test's log, in a directory of its own that a restart keeps: args is its
// command line for the port it is given and that directory.
func startNode(t testing.TB, bin, name string, args func(port int, dir string) []string) *RedisNode {
	t.Helper()
	dir := t.TempDir()
	srv := startServer(t, name, func(port int) *exec.Cmd { return exec.Command(bin, args(port, dir)...) }, redisReady)
	return &RedisNode{Addr: fmt.Sprintf("127.0.0.1:%d", srv.port), srv: srv}
}

// serverArgs is the command line of a topology's redis-server on
// loopback: nothing persisted, no eviction, in the foreground; extra
// (cluster or replica settings) follows.
func serverArgs(port int, dir string, extra ...string) []string {
	return append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction", "--daemonize", "no", "--loglevel", "notice"}, extra...)
}

// MasterAddr is the master the first sentinel that answers names.
func (s *RedisSentinelSet) MasterAddr(ctx context.Context) (string, error) {
	var err error
	for _, n := range s.Sentinels {
		var v string
		if v, err = n.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster); err == nil {
			host, port, _ := strings.Cut(v, "\n")
			return net.JoinHostPort(host, port), nil
		}
	}
	return "", err
}

// waitKnown waits until every sentinel names master as the master, sees
// one replica of it in sync (master_link_status up) and the two other
// sentinels: only then can they agree on a failover.
func (s *RedisSentinelSet) waitKnown(t testing.TB, master string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	last := ""
	for {
		ok := true
		for _, n := range s.Sentinels {
			v, err := n.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
			host, port, _ := strings.Cut(v, "\n")
			if err != nil || net.JoinHostPort(host, port) != master {
				ok, last = false, fmt.Sprintf("sentinel %s names master %q (%v), want %s", n.Addr, v, err, master)
				break
			}
			info, err := n.Do(ctx, "INFO", "sentinel")
			if err != nil || !strings.Contains(info, "slaves=1,sentinels=3") {
				ok, last = false, fmt.Sprintf("sentinel %s: %q %v", n.Addr, info, err)
				break
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sentinel set not ready within %s: %s", readyTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// KillMaster SIGKILLs the master and waits until the sentinels have
// promoted the replica (every sentinel names it) and it answers as a
// master. The old master stays down.
func (s *RedisSentinelSet) KillMaster(t testing.TB) {
	t.Helper()
	s.Master.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	last := ""
	for {
		ok := true
		for _, n := range s.Sentinels {
			v, err := n.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
			host, port, _ := strings.Cut(v, "\n")
			if err != nil || net.JoinHostPort(host, port) != s.Replica.Addr {
				ok, last = false, fmt.Sprintf("sentinel %s names master %q (%v)", n.Addr, v, err)
				break
			}
		}
		if ok {
			role, err := s.Replica.Do(ctx, "ROLE")
			if err != nil || !strings.HasPrefix(role, "master") {
				ok, last = false, fmt.Sprintf("promoted %s says role %q (%v)", s.Replica.Addr, role, err)
			}
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sentinels did not promote %s within %s: %s", s.Replica.Addr, failoverTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// redisDo sends one command in RESP (after AUTH when password is set) and
// reads its reply: a status, an error, an integer, a bulk string, or an
// array of them (joined by newlines, nested arrays flattened).
func redisDo(ctx context.Context, addr, password string, args ...string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	c.SetDeadline(deadline)
	var b strings.Builder
	command := func(args []string) {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if password != "" {
		command([]string{"AUTH", password})
	}
	command(args)
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	if password != "" {
		var auth []string
		if err := readReply(r, &auth); err != nil {
			return "", fmt.Errorf("AUTH: %w", err)
		}
	}
	var out []string
	if err := readReply(r, &out); err != nil {
		return strings.Join(out, "\n"), err
	}
	return strings.Join(out, "\n"), nil
}

func readReply(r *bufio.Reader, out *[]string) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		*out = append(*out, line)
	case '-':
		return fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			*out = append(*out, "")
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, string(buf[:n]))
	case '*':
		n, _ := strconv.Atoi(line[1:])
		for i := 0; i < n; i++ {
			if err := readReply(r, out); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// RedisCLIBinary is the redis-cli that creates a cluster ("" when there
// is none).
func RedisCLIBinary() string { return findBinary("redis-cli", "/usr/bin/redis-cli") }
