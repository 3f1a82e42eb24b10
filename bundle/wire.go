package bundle

import (
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// wireReader walks a serialized protobuf message in place, through a small
// window over an io.ReaderAt (an ONNX file), instead of over a byte slice of
// the whole file. A field it does not need, such as an initializer's
// raw_data, is skipped by moving its offset: the bytes are never read, so
// walking a 2 GiB model costs the window plus what the caller keeps.
//
// Its errors are protowire's, for the same damage at the same place, so the
// streaming decoder answers exactly as the byte-slice one did (checked
// against it in onnx_stream_test.go). A read error of the file itself is an
// *ioError, which callers do not report as a damaged model.
type wireReader struct {
	ra    io.ReaderAt
	size  int64
	pos   int64
	buf   []byte // the window: the bytes at [bufAt, bufAt+len(buf))
	bufAt int64
}

// wireWindow is how much of the file is read at a time: enough that tags,
// varints and names of a message are served from memory.
const wireWindow = 64 << 10

// maxVarintLen is the longest a varint may be on the wire.
const maxVarintLen = 10

// ioError is a failure to read the file, as opposed to a damaged message.
type ioError struct{ err error }

func (e *ioError) Error() string { return "read: " + e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

// The parse errors protowire gives, derived from protowire itself so that
// they stay the errors the byte-slice decoder returned.
var (
	errTruncated = protowire.ParseError(func() int { _, n := protowire.ConsumeBytes([]byte{1}); return n }())
	errEndGroup  = protowire.ParseError(protowire.ConsumeFieldValue(1, protowire.EndGroupType, nil))
	// Too deep a nest of groups: protowire has no exported code for it and
	// reports its generic parse error, which any unknown code maps to.
	errGroupDepth = protowire.ParseError(math.MinInt)
)

func newWireReader(ra io.ReaderAt, size int64) *wireReader {
	return &wireReader{ra: ra, size: size}
}

// peek returns up to n bytes at the current offset, fewer where end (the end
// of the enclosing message) or the file comes first.
func (w *wireReader) peek(n int, end int64) ([]byte, error) {
	if lim := end - w.pos; int64(n) > lim {
		n = int(max(lim, 0))
	}
	if w.pos < w.bufAt || w.pos+int64(n) > w.bufAt+int64(len(w.buf)) {
		if err := w.fill(max(n, wireWindow)); err != nil {
			return nil, err
		}
	}
	off := int(w.pos - w.bufAt)
	return w.buf[off:min(off+n, len(w.buf))], nil
}

// fill reads n bytes (fewer at the end of the file) at the current offset
// into the window.
func (w *wireReader) fill(n int) error {
	n = int(min(int64(n), max(w.size-w.pos, 0)))
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	w.buf = w.buf[:n]
	w.bufAt = w.pos
	got, err := w.ra.ReadAt(w.buf, w.pos)
	if got == n {
		return nil
	}
	w.buf = w.buf[:got]
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // the file shrank under us
	}
	return &ioError{err}
}

// field is one field of a message being walked: its number and wire type,
// the value of a varint, and the extent of its payload ([at, end) of a
// length-delimited field; end is where the next field starts for any type).
type field struct {
	num     protowire.Number
	typ     protowire.Type
	x       uint64
	at, end int64
}

// varint reads a varint that must end before end.
func (w *wireReader) varint(end int64) (uint64, error) {
	b, err := w.peek(maxVarintLen, end)
	if err != nil {
		return 0, err
	}
	x, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, protowire.ParseError(n)
	}
	w.pos += int64(n)
	return x, nil
}

// eachField calls fn for every field of the message at [start, end), in
// order. fn may read the payload of a length-delimited field (bytes, or
// a nested eachField); whatever it leaves unread is skipped.
func (w *wireReader) eachField(start, end int64, fn func(f field) error) error {
	w.pos = start
	for w.pos < end {
		b, err := w.peek(maxVarintLen, end)
		if err != nil {
			return err
		}
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		w.pos += int64(n)
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			l, err := w.varint(end)
			if err != nil {
				return err
			}
			if l > uint64(end-w.pos) {
				return errTruncated
			}
			f.at, f.end = w.pos, w.pos+int64(l)
		case protowire.VarintType:
			if f.x, err = w.varint(end); err != nil {
				return err
			}
			f.end = w.pos
		default:
			if err := w.skipValue(num, typ, end, protowire.DefaultRecursionLimit); err != nil {
				return err
			}
			f.end = w.pos
		}
		if err := fn(f); err != nil {
			return err
		}
		w.pos = f.end
	}
	return nil
}

// skipValue skips a field value of a fixed-size or group type, as
// protowire.ConsumeFieldValue does, with the same errors.
func (w *wireReader) skipValue(num protowire.Number, typ protowire.Type, end int64, depth int) error {
	switch typ {
	case protowire.VarintType:
		_, err := w.varint(end)
		return err
	case protowire.Fixed32Type, protowire.Fixed64Type:
		n := int64(4)
		if typ == protowire.Fixed64Type {
			n = 8
		}
		if end-w.pos < n {
			return errTruncated
		}
		w.pos += n
		return nil
	case protowire.BytesType:
		l, err := w.varint(end)
		if err != nil {
			return err
		}
		if l > uint64(end-w.pos) {
			return errTruncated
		}
		w.pos += int64(l)
		return nil
	case protowire.StartGroupType:
		if depth < 0 {
			return errGroupDepth
		}
		for {
			b, err := w.peek(maxVarintLen, end)
			if err != nil {
				return err
			}
			num2, typ2, n := protowire.ConsumeTag(b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			w.pos += int64(n)
			if typ2 == protowire.EndGroupType {
				if num2 != num {
					return errEndGroup
				}
				return nil
			}
			if err := w.skipValue(num2, typ2, end, depth-1); err != nil {
				return err
			}
		}
	case protowire.EndGroupType:
		return errEndGroup
	default:
		return protowire.ParseError(protowire.ConsumeFieldValue(num, typ, nil))
	}
}

// bytes reads the payload of a length-delimited field into memory. Only
// fields that are graph structure (names, value infos, opsets) are read;
// maxWireField bounds each so that a hostile file cannot make a field of
// structure cost gigabytes.
func (w *wireReader) bytes(f field) ([]byte, error) {
	n := f.end - f.at
	if n > maxWireField {
		return nil, fmt.Errorf("field %d is %d bytes, more than the %d MiB a field of graph structure may take", f.num, n, maxWireField>>20)
	}
	if n <= wireWindow {
		w.pos = f.at
		b, err := w.peek(int(n), f.end)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), b...), nil
	}
	out := make([]byte, n)
	if got, err := w.ra.ReadAt(out, f.at); int64(got) != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, &ioError{err}
	}
	return out, nil
}

// maxWireField bounds one field of graph structure (a graph input's
// ValueInfoProto, a name) read into memory; weights are never read.
const maxWireField = 64 << 20
