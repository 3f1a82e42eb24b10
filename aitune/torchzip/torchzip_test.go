package torchzip

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"io"
	"strings"
	"testing"
)

func write(t *testing.T, archive string, pkl []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, archive, pkl); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWriteLayout(t *testing.T) {
	// Pickles of several lengths move every later record's header, so each
	// alignment is computed from a different cursor.
	for _, n := range []int{0, 1, 13, 63, 64, 65, 1000} {
		pkl := bytes.Repeat([]byte{'x'}, n)
		b := write(t, "state_dict", pkl)
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
			if f.Method != zip.Store {
				t.Errorf("%s: method %d, want stored", f.Name, f.Method)
			}
			if f.Flags&0x8 != 0 {
				t.Errorf("%s: has a data descriptor", f.Name)
			}
			off, err := f.DataOffset()
			if err != nil {
				t.Fatal(err)
			}
			if off%Alignment != 0 {
				t.Errorf("pickle len %d: %s data at offset %d, not a multiple of %d", n, f.Name, off, Alignment)
			}
			// The local header's extra field is torch's "FB" padding.
			lh := b[off-int64(len(f.Extra)) : off]
			if !bytes.HasPrefix(lh, []byte("FB")) || int(binary.LittleEndian.Uint16(lh[2:4])) != len(lh)-4 || strings.Trim(string(lh[4:]), "Z") != "" {
				t.Errorf("%s: local extra %q is not FB padding", f.Name, lh)
			}
			if f.ModifiedDate != dosDate1980 || f.ModifiedTime != 0 {
				t.Errorf("%s: timestamp %#x %#x, want fixed 1980-01-01", f.Name, f.ModifiedDate, f.ModifiedTime)
			}
		}
		want := "state_dict/data.pkl state_dict/.format_version state_dict/.storage_alignment state_dict/byteorder state_dict/version state_dict/.data/serialization_id"
		if got := strings.Join(names, " "); got != want {
			t.Errorf("entries:\n got %s\nwant %s", got, want)
		}
		a, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if a.Name != "state_dict" || a.Version != 3 || !bytes.Equal(a.Pickle(), pkl) {
			t.Errorf("Read = name %q version %d pickle %q", a.Name, a.Version, a.Pickle())
		}
		for rec, want := range map[string]string{".format_version": "1", ".storage_alignment": "64", "byteorder": "little", "version": "3\n"} {
			if got := string(a.Records[rec]); got != want {
				t.Errorf("%s = %q, want %q", rec, got, want)
			}
		}
		if id := string(a.Records[".data/serialization_id"]); len(id) != 20 || strings.Trim(id, "0123456789") != "" {
			t.Errorf("serialization_id %q is not 20 digits", id)
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	a := write(t, "state_dict", []byte("pickle"))
	b := write(t, "state_dict", []byte("pickle"))
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of the same pickle differ")
	}
	if c := write(t, "state_dict", []byte("other")); bytes.Equal(a, c) {
		t.Fatal("different pickles give the same archive")
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name    string
		archive string
		recs    []Record
	}{
		{"empty archive name", "", StandardRecords(nil)},
		{"slash in archive name", "a/b", StandardRecords(nil)},
		{"dot archive name", "..", StandardRecords(nil)},
		{"directory record", "a", []Record{{"data/", nil}}},
		{"absolute record", "a", []Record{{"/x", nil}}},
		{"duplicate record", "a", []Record{{"x", nil}, {"x", nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := WriteRecords(io.Discard, tt.archive, tt.recs); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// rawZip builds a zip with arbitrary entries, for archives Write refuses
// to produce.
func rawZip(t *testing.T, entries ...struct {
	name   string
	data   string
	method uint16
}) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, 5) })
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: e.method})
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, e.data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type entry = struct {
	name   string
	data   string
	method uint16
}

func TestReadRules(t *testing.T) {
	ok := []entry{{"m/data.pkl", "p", zip.Store}, {"m/version", "3\n", zip.Store}}
	tests := []struct {
		name    string
		entries []entry
		want    string // substring of the error; "" = valid
	}{
		{"minimal valid", ok, ""},
		{".data/version accepted", []entry{{"m/data.pkl", "p", zip.Store}, {"m/.data/version", "6\n", zip.Store}}, ""},
		{"no subdirectory", []entry{{"data.pkl", "p", zip.Store}}, "not in a subdirectory"},
		{"second folder", append(append([]entry{}, ok...), entry{"n/x", "", zip.Store}), "outside the archive folder"},
		{"compressed record", []entry{{"m/data.pkl", "p", zip.Deflate}, {"m/version", "3\n", zip.Store}}, "compressed"},
		{"directory entry", append(append([]entry{}, ok...), entry{"m/data/", "", zip.Store}), "directory entry"},
		{"no data.pkl", []entry{{"m/version", "3\n", zip.Store}}, "no data.pkl"},
		{"no version", []entry{{"m/data.pkl", "p", zip.Store}}, "no version record"},
		{"version 11", []entry{{"m/data.pkl", "p", zip.Store}, {"m/version", "11\n", zip.Store}}, "not a supported version"},
		{"version not a number", []entry{{"m/data.pkl", "p", zip.Store}, {"m/version", "three", zip.Store}}, "not a supported version"},
		{"bad byteorder", append(append([]entry{}, ok...), entry{"m/byteorder", "middle", zip.Store}), "byteorder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := rawZip(t, tt.entries...)
			_, err := Read(bytes.NewReader(b), int64(len(b)))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := Read(bytes.NewReader([]byte("not a zip")), 9); err == nil {
		t.Error("Read accepted a non-zip")
	}
}

func TestPadding(t *testing.T) {
	for cursor := uint64(0); cursor < 200; cursor += 7 {
		for nameLen := 1; nameLen < 70; nameLen += 5 {
			p := padding(cursor, nameLen)
			if end := cursor + localHeaderLen + uint64(nameLen) + uint64(len(p)); end%Alignment != 0 {
				t.Fatalf("cursor %d name %d: data at %d", cursor, nameLen, end)
			}
			if len(p) < 4 || len(p) >= 4+Alignment {
				t.Fatalf("padding of %d bytes", len(p))
			}
		}
	}
}
