package pickle

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// pickleCase pairs a Go value with the Python expression for the same value
// and the bytes Python writes for it (pickletools.optimize(pickle.dumps(v,
// protocol=2)), recorded from CPython 3.11 and re-checked against the local
// python3 when there is one).
type pickleCase struct {
	name string
	v    Value
	py   string
	want string // hex
}

func cases() []pickleCase {
	list := func(n int) (List, string) {
		l, py := make(List, n), make([]string, n)
		for i := range l {
			l[i] = Int(i % 7)
			py[i] = string(rune('0' + i%7))
		}
		return l, "[" + strings.Join(py, ", ") + "]"
	}
	dict := func(n int) (Dict, string) {
		d, py := make(Dict, n), make([]string, n)
		for i := range d {
			d[i] = Item{Key: Str(fmt.Sprint("k", i)), Value: Int(i % 7)}
			py[i] = fmt.Sprintf("'k%d': %d", i, i%7)
		}
		return d, "{" + strings.Join(py, ", ") + "}"
	}
	l1001, l1001py := list(1001)
	l2000, l2000py := list(2000)
	d1000, d1000py := dict(1000)
	d1001, d1001py := dict(1001)
	return []pickleCase{
		{"none", None{}, "None", "80024e2e"},
		{"true", Bool(true), "True", "8002882e"},
		{"false", Bool(false), "False", "8002892e"},
		{"int 0", Int(0), "0", "80024b002e"},
		{"int 255 BININT1", Int(255), "255", "80024bff2e"},
		{"int 256 BININT2", Int(256), "256", "80024d00012e"},
		{"int 65536 BININT", Int(65536), "65536", "80024a000001002e"},
		{"int -1 BININT", Int(-1), "-1", "80024affffffff2e"},
		{"int -129", Int(-129), "-129", "80024a7fffffff2e"},
		{"int 2**31 LONG1", Int(1 << 31), "2**31", "80028a0500000080002e"},
		{"int 2**40 LONG1", Int(1 << 40), "2**40", "80028a060000000000012e"},
		{"int -2**40 LONG1", Int(-1 << 40), "-2**40", "80028a060000000000ff2e"},
		{"int min int64", Int(math.MinInt64), "-2**63", "80028a0800000000000000802e"},
		{"int max int64", Int(math.MaxInt64), "2**63-1", "80028a08ffffffffffffff7f2e"},
		{"float 1.0", Float(1), "1.0", "8002473ff00000000000002e"},
		{"float nan", Float(math.NaN()), "float('nan')", "8002477ff80000000000002e"},
		{"float -0.0", Float(math.Copysign(0, -1)), "-0.0", "80024780000000000000002e"},
		{"float -inf", Float(math.Inf(-1)), "float('-inf')", "800247fff00000000000002e"},
		{"str", Str("batch0"), "'batch0'", "800258060000006261746368302e"},
		{"str unicode", Str("é€"), "'é€'", "80025805000000c3a9e282ac2e"},
		{"str empty", Str(""), "''", "800258000000002e"},
		{"bytes via _codecs.encode", Bytes("ab\xff"), "b'ab\\xff'", "8002635f636f646563730a656e636f64650a58040000006162c3bf58060000006c6174696e3186522e"},
		{"bytes empty", Bytes{}, "b''", "8002635f5f6275696c74696e5f5f0a62797465730a29522e"},
		{"list empty", List{}, "[]", "80025d2e"},
		{"list one APPEND", List{Int(1)}, "[1]", "80025d4b01612e"},
		{"list two APPENDS", List{Int(1), Int(2)}, "[1, 2]", "80025d284b014b02652e"},
		{"tuple empty", Tuple{}, "()", "8002292e"},
		{"tuple1", Tuple{Int(1)}, "(1,)", "80024b01852e"},
		{"tuple2", Tuple{Int(1), Int(2)}, "(1, 2)", "80024b014b02862e"},
		{"tuple3", Tuple{Int(1), Int(2), Int(3)}, "(1, 2, 3)", "80024b014b024b03872e"},
		{"tuple4 MARK TUPLE", Tuple{Int(1), Int(2), Int(3), Int(4)}, "(1, 2, 3, 4)", "8002284b014b024b034b04742e"},
		{"dict empty", Dict{}, "{}", "80027d2e"},
		{"dict one SETITEM", D("a", Int(1)), "{'a': 1}", "80027d5801000000614b01732e"},
		{"dict order kept", D("b", Int(1), "a", None{}), "{'b': 1, 'a': None}", "80027d28580100000062" + "4b01580100000061" + "4e752e"},
		{"dict tuple key", Dict{{Key: Tuple{Str("options"), Str("mask")}, Value: Int(1)}}, "{('options', 'mask'): 1}", pyTupleKey},
		{"global", Global{"collections", "OrderedDict"}, "collections.OrderedDict", "800263636f6c6c656374696f6e730a4f726465726564446963740a2e"},
		{"call REDUCE", Call{Func: Global{"datetime", "timedelta"}, Args: Tuple{Int(1), Int(0), Int(0)}}, "datetime.timedelta(1)", "8002636461746574696d650a74696d6564656c74610a4b014b004b0087522e"},
		{"OrderedDict: REDUCE, SETITEMS", Object{Func: Global{"collections", "OrderedDict"}, Items: D("a", None{}, "b", Int(3))},
			"collections.OrderedDict([('a', None), ('b', 3)])", ""},
		{"OrderedDict of one item: SETITEM", Object{Func: Global{"collections", "OrderedDict"}, Items: D("a", None{})},
			"collections.OrderedDict([('a', None)])", ""},
		{"OrderedDict subclass with instance state: BUILD", Object{Func: Global{"__main__", "Output"}, Items: D("a", None{}, "b", Int(1)), State: D("n", Int(3))},
			"Output([('a', None), ('b', 1)], n=3)", ""},
		{"OrderedDict 1001 items: a lone trailing SETITEM", od1001, "collections.OrderedDict((str(i), i) for i in range(1001))", ""},
		{"namedtuple: NEWOBJ", NewObj{Class: Global{"__main__", "Point"}, Args: Tuple{None{}, Int(2)}}, "Point(None, 2)", ""},
		{"nested", List{Tuple{Str("x"), None{}}, D("k", List{Float(2.5)})}, "[('x', None), {'k': [2.5]}]",
			pyNested},
		// Long containers are checked against Python only (too long to spell out).
		{"list 1001: batch of 1000, then a MARKed batch of 1", l1001, l1001py, ""},
		{"list 2000: two batches, no empty tail", l2000, l2000py, ""},
		{"dict 1000: one batch and the C pickler's empty tail", d1000, d1000py, ""},
		{"dict 1001: batch of 1000, then a MARKed batch of 1", d1001, d1001py, ""},
	}
}

var od1001 = func() Object {
	o := Object{Func: Global{"collections", "OrderedDict"}}
	for i := range 1001 {
		o.Items = append(o.Items, Item{Key: Str(fmt.Sprint(i)), Value: Int(int64(i))})
	}
	return o
}()

// Expected bytes spelled out separately where a single literal would be
// unreadable.
var (
	pyTupleKey = "80027d" + "5807000000" + hex.EncodeToString([]byte("options")) + "5804000000" + hex.EncodeToString([]byte("mask")) + "86" + "4b01" + "73" + "2e"
	pyNested   = "80025d28" + "580100000078" + "4e" + "86" + "7d" + "58010000006b" + "5d" + "474004000000000000" + "61" + "73" + "652e"
)

func TestMarshalMatchesRecordedBytes(t *testing.T) {
	for _, c := range cases() {
		if c.want == "" {
			continue // checked against Python only (too long to spell out)
		}
		t.Run(c.name, func(t *testing.T) {
			got, err := Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if h := hex.EncodeToString(got); h != c.want {
				t.Errorf("Marshal = %s\n          want %s", h, c.want)
			}
		})
	}
}

// TestMarshalMatchesPython runs the local python3 as the oracle for every
// case, including the long ones without a recorded form.
func TestMarshalMatchesPython(t *testing.T) {
	py := python(t)
	cs := cases()
	exprs := make([]string, len(cs))
	for i, c := range cs {
		exprs[i] = c.py
	}
	in, _ := json.Marshal(exprs)
	cmd := exec.Command(py, "testdata/pydumps.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pydumps.py: %v\n%s", err, stderr.String())
	}
	var pyHex []string
	if err := json.Unmarshal(out, &pyHex); err != nil || len(pyHex) != len(cs) {
		t.Fatalf("pydumps.py output %q: %v", out, err)
	}
	for i, c := range cs {
		got, err := Marshal(c.v)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if h := hex.EncodeToString(got); h != pyHex[i] {
			t.Errorf("%s: Go wrote %s\n  Python wrote %s", c.name, h, pyHex[i])
		}
		if c.want != "" && c.want != pyHex[i] {
			t.Errorf("%s: recorded bytes %s differ from this Python's %s", c.name, c.want, pyHex[i])
		}
	}
}

func TestMarshalErrors(t *testing.T) {
	self := List{nil}
	self[0] = self
	tests := []struct {
		name string
		v    Value
		want string
	}{
		{"nil value", List{nil}, "nil Value"},
		{"invalid utf-8", Str("\xff"), "not valid UTF-8"},
		{"list key", Dict{{Key: List{}, Value: None{}}}, "list cannot be a dict key"},
		{"dict key", Dict{{Key: Dict{}, Value: None{}}}, "dict cannot be a dict key"},
		{"tuple holding a list as key", Dict{{Key: Tuple{Int(1), List{}}, Value: None{}}}, "list cannot be a dict key"},
		{"empty global", Global{"", "x"}, "invalid global"},
		{"newline in global", Global{"torch", "a\nb"}, "invalid global"},
		{"self-containing list", self, "deeper than 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Marshal(tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestMarshalDeterministic(t *testing.T) {
	v := D("b", List{Float(math.NaN()), Bytes("x")}, "a", Tuple{Global{"torch", "float32"}})
	a, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, _ := Marshal(v)
		if !bytes.Equal(a, b) {
			t.Fatal("Marshal is not deterministic")
		}
	}
}

func TestEncodeLong(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "00"}, {127, "7f"}, {128, "8000"}, {-128, "80"}, {-129, "7fff"}, {255, "ff00"}, {-1, "ff"},
	}
	for _, tt := range tests {
		if got := hex.EncodeToString(encodeLong(tt.n)); got != tt.want {
			t.Errorf("encodeLong(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

// python returns the python3 to use as an oracle; without one the test is
// skipped, except in CI, where python3 is part of the contract.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 not found; CI must have it (the pickle tests use it as their oracle)")
		}
		t.Skip("python3 not found")
	}
	return p
}

// TestBatchTails pins the C pickler's batching without needing python3:
// the end of each pickle shows how the last batch was closed.
func TestBatchTails(t *testing.T) {
	ints := func(n int) List {
		l := make(List, n)
		for i := range l {
			l[i] = Int(0)
		}
		return l
	}
	keys := func(n int) Dict {
		d := make(Dict, n)
		for i := range d {
			d[i] = Item{Key: Int(i), Value: None{}}
		}
		return d
	}
	tests := []struct {
		name  string
		v     Value
		tail  string // hex of the last bytes
		marks int    // MARK count
	}{
		{"list 1000", ints(1000), "4b00652e", 1},
		{"list 1001", ints(1001), "65284b00652e", 2},
		{"list 2000", ints(2000), "4b00652e", 2},
		{"dict 1000 has an empty tail batch", keys(1000), "4e7528752e", 2},
		{"dict 1001", keys(1001), "75284de8034e752e", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if h := hex.EncodeToString(b); !strings.HasSuffix(h, tt.tail) {
				t.Errorf("pickle ends %s, want …%s", h[len(h)-min(len(h), 24):], tt.tail)
			}
			// A batch opens with MARK right after EMPTY_LIST/EMPTY_DICT or
			// the previous batch's APPENDS/SETITEMS; no item here writes a
			// byte pair that looks like those.
			n := strings.Count(string(b), "](") + strings.Count(string(b), "}(") + strings.Count(string(b), "e(") + strings.Count(string(b), "u(")
			if n != tt.marks {
				t.Errorf("found %d batches, want %d", n, tt.marks)
			}
		})
	}
}
