package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Opcodes of protocols 0–2 that the writer uses (names as in Python's
// pickletools).
const (
	opProto      = 0x80
	opStop       = '.'
	opMark       = '('
	opNone       = 'N'
	opNewTrue    = 0x88
	opNewFalse   = 0x89
	opBinInt     = 'J'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opLong1      = 0x8a
	opBinFloat   = 'G'
	opBinUnicode = 'X'
	opEmptyList  = ']'
	opAppend     = 'a'
	opAppends    = 'e'
	opEmptyDict  = '}'
	opSetItem    = 's'
	opSetItems   = 'u'
	opEmptyTuple = ')'
	opTuple      = 't'
	opTuple1     = 0x85
	opTuple2     = 0x86
	opTuple3     = 0x87
	opGlobal     = 'c'
	opReduce     = 'R'
	opNewObj     = 0x81
	opBuild      = 'b'
)

// Protocol is the pickle protocol the writer declares. torch.save writes
// protocol 2, and so does this package, so that a Go-written data.pkl uses
// the same opcodes as one torch wrote.
const Protocol = 2

// batchSize is how many items Python's pickler puts between one MARK and
// its APPENDS/SETITEMS; matching it keeps long lists byte-identical.
const batchSize = 1000

// maxDepth bounds nesting: a Go slice can contain itself, and a pickle
// that deep is a bug in the caller, not data.
const maxDepth = 1000

// Marshal returns the protocol-2 pickle of v: PROTO 2, v, STOP.
func Marshal(v Value) ([]byte, error) {
	w := writer{}
	w.buf.WriteByte(opProto)
	w.buf.WriteByte(Protocol)
	if err := w.value(v, 0); err != nil {
		return nil, err
	}
	w.buf.WriteByte(opStop)
	return w.buf.Bytes(), nil
}

type writer struct {
	buf bytes.Buffer
}

func (w *writer) value(v Value, depth int) error {
	if depth > maxDepth {
		return errors.New("pickle: value nested deeper than 1000 levels (a slice that contains itself?)")
	}
	switch v := v.(type) {
	case nil:
		return errors.New("pickle: nil Value (use pickle.None{} for Python's None)")
	case None:
		w.buf.WriteByte(opNone)
	case Bool:
		if v {
			w.buf.WriteByte(opNewTrue)
		} else {
			w.buf.WriteByte(opNewFalse)
		}
	case Int:
		w.int(int64(v))
	case Float:
		w.float(float64(v))
	case Str:
		return w.str(string(v))
	case Bytes:
		return w.bytes(v)
	case List:
		return w.list(v, depth)
	case Tuple:
		return w.tuple(v, depth)
	case Dict:
		return w.dict(v, depth)
	case Global:
		return w.global(v)
	case Call:
		if err := w.global(v.Func); err != nil {
			return err
		}
		if err := w.tuple(v.Args, depth); err != nil {
			return err
		}
		w.buf.WriteByte(opReduce)
	case NewObj:
		if err := w.global(v.Class); err != nil {
			return err
		}
		if err := w.tuple(v.Args, depth); err != nil {
			return err
		}
		w.buf.WriteByte(opNewObj)
	case Object:
		return w.object(v, depth)
	default:
		return fmt.Errorf("pickle: unsupported value type %T", v)
	}
	return nil
}

// int picks the opcode Python's save_long picks for the same value.
func (w *writer) int(n int64) {
	switch {
	case n >= 0 && n <= 0xff:
		w.buf.WriteByte(opBinInt1)
		w.buf.WriteByte(byte(n))
	case n >= 0 && n <= 0xffff:
		w.buf.WriteByte(opBinInt2)
		w.buf.Write(binary.LittleEndian.AppendUint16(nil, uint16(n)))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		w.buf.WriteByte(opBinInt)
		w.buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(n))))
	default:
		enc := encodeLong(n)
		w.buf.WriteByte(opLong1)
		w.buf.WriteByte(byte(len(enc)))
		w.buf.Write(enc)
	}
}

// encodeLong is pickle.encode_long: the shortest little-endian two's
// complement form of n.
func encodeLong(n int64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(n))
	// Drop redundant sign bytes, keeping one whose top bit carries the sign.
	for len(b) > 1 {
		last, prev := b[len(b)-1], b[len(b)-2]
		if (last == 0x00 && prev&0x80 == 0) || (last == 0xff && prev&0x80 != 0) {
			b = b[:len(b)-1]
			continue
		}
		break
	}
	return b
}

// canonicalNaN is the NaN Python's struct.pack('>d', float('nan')) writes;
// Go's math.NaN() has a different payload, and the bytes should not depend
// on which NaN the caller happened to hold.
const canonicalNaN = 0x7ff8000000000000

func (w *writer) float(f float64) {
	bits := math.Float64bits(f)
	if math.IsNaN(f) {
		bits = canonicalNaN
	}
	w.buf.WriteByte(opBinFloat)
	w.buf.Write(binary.BigEndian.AppendUint64(nil, bits))
}

func (w *writer) str(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("pickle: string %q is not valid UTF-8", s)
	}
	if uint64(len(s)) > math.MaxUint32 {
		return errors.New("pickle: string longer than 4 GiB")
	}
	w.buf.WriteByte(opBinUnicode)
	w.buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s))))
	w.buf.WriteString(s)
	return nil
}

// bytes writes a bytes object the way protocol 2 does (and hence the way
// torch.save does): _codecs.encode(<the bytes as a latin-1 str>, "latin1"),
// or bytes() when empty. BINBYTES would be shorter but is a protocol-3
// opcode; keeping to protocol 2 means every opcode in data.pkl is one torch
// itself emits, and the Python pickler's own output is a test oracle.
func (w *writer) bytes(b []byte) error {
	if len(b) == 0 {
		return w.value(Call{Func: Global{"__builtin__", "bytes"}, Args: Tuple{}}, 0)
	}
	latin1 := make([]rune, len(b))
	for i, c := range b {
		latin1[i] = rune(c)
	}
	return w.value(Call{Func: Global{"_codecs", "encode"}, Args: Tuple{Str(string(latin1)), Str("latin1")}}, 0)
}

func (w *writer) list(l List, depth int) error {
	w.buf.WriteByte(opEmptyList)
	return w.batch(len(l), false, func(i int) error { return w.value(l[i], depth+1) }, opAppend, opAppends)
}

// object writes what save_reduce writes for (Func, Args, State, None,
// iter(Items)): the items go through the C pickler's batch_dict, whose
// lone trailing item (and a lone item) takes SETITEM.
func (w *writer) object(o Object, depth int) error {
	for _, it := range o.Items {
		if err := hashable(it.Key, 0); err != nil {
			return err
		}
	}
	if err := w.global(o.Func); err != nil {
		return err
	}
	if err := w.tuple(o.Args, depth); err != nil {
		return err
	}
	w.buf.WriteByte(opReduce)
	item := func(i int) error {
		if err := w.value(o.Items[i].Key, depth+1); err != nil {
			return err
		}
		return w.value(o.Items[i].Value, depth+1)
	}
	for start := 0; start < len(o.Items); start += batchSize {
		end := min(start+batchSize, len(o.Items))
		if end-start == 1 {
			if err := item(start); err != nil {
				return err
			}
			w.buf.WriteByte(opSetItem)
			continue
		}
		w.buf.WriteByte(opMark)
		for i := start; i < end; i++ {
			if err := item(i); err != nil {
				return err
			}
		}
		w.buf.WriteByte(opSetItems)
	}
	if o.State != nil {
		if err := w.value(o.State, depth+1); err != nil {
			return err
		}
		w.buf.WriteByte(opBuild)
	}
	return nil
}

func (w *writer) dict(d Dict, depth int) error {
	for _, it := range d {
		if err := hashable(it.Key, 0); err != nil {
			return err
		}
	}
	w.buf.WriteByte(opEmptyDict)
	return w.batch(len(d), true, func(i int) error {
		if err := w.value(d[i].Key, depth+1); err != nil {
			return err
		}
		return w.value(d[i].Value, depth+1)
	}, opSetItem, opSetItems)
}

// batch writes n items as CPython's C pickler (the one torch.save uses)
// does in batch_list_exact and batch_dict_exact: a container of exactly one
// item gets the singular opcode; otherwise items go in runs of up to 1000
// between MARK and the plural opcode, even a lone trailing one. For dicts
// whose size is a non-zero multiple of 1000 the C loop also emits a final
// empty MARK/SETITEMS, reproduced here (emptyTail) to stay byte-identical.
func (w *writer) batch(n int, emptyTail bool, item func(int) error, one, many byte) error {
	if n == 0 {
		return nil
	}
	if n == 1 {
		if err := item(0); err != nil {
			return err
		}
		w.buf.WriteByte(one)
		return nil
	}
	for start := 0; start < n || (emptyTail && start == n && n%batchSize == 0); start += batchSize {
		w.buf.WriteByte(opMark)
		for i := start; i < min(start+batchSize, n); i++ {
			if err := item(i); err != nil {
				return err
			}
		}
		w.buf.WriteByte(many)
	}
	return nil
}

func (w *writer) tuple(t Tuple, depth int) error {
	if len(t) == 0 {
		w.buf.WriteByte(opEmptyTuple)
		return nil
	}
	if len(t) > 3 {
		w.buf.WriteByte(opMark)
	}
	for _, v := range t {
		if err := w.value(v, depth+1); err != nil {
			return err
		}
	}
	switch len(t) {
	case 1:
		w.buf.WriteByte(opTuple1)
	case 2:
		w.buf.WriteByte(opTuple2)
	case 3:
		w.buf.WriteByte(opTuple3)
	default:
		w.buf.WriteByte(opTuple)
	}
	return nil
}

func (w *writer) global(g Global) error {
	for _, s := range []string{g.Module, g.Name} {
		if s == "" || strings.ContainsAny(s, "\n") || !utf8.ValidString(s) {
			return fmt.Errorf("pickle: invalid global %q.%q (module and name must be non-empty single-line UTF-8)", g.Module, g.Name)
		}
	}
	w.buf.WriteByte(opGlobal)
	w.buf.WriteString(g.Module)
	w.buf.WriteByte('\n')
	w.buf.WriteString(g.Name)
	w.buf.WriteByte('\n')
	return nil
}

// hashable rejects dict keys Python could not hash: an unpickler would fail
// with "unhashable type" long after this writer returned.
func hashable(v Value, depth int) error {
	if depth > maxDepth {
		return errors.New("pickle: dict key nested deeper than 1000 levels")
	}
	switch v := v.(type) {
	case List:
		return errors.New("pickle: a list cannot be a dict key (unhashable in Python)")
	case Dict:
		return errors.New("pickle: a dict cannot be a dict key (unhashable in Python)")
	case Tuple:
		for _, e := range v {
			if err := hashable(e, depth+1); err != nil {
				return err
			}
		}
	case nil:
		return errors.New("pickle: nil dict key")
	}
	return nil
}
