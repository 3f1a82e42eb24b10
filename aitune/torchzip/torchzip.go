package torchzip

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// Alignment is the byte alignment of every record's data, torch's
// kFieldAlignment: it lets torch.load(mmap=True) map tensor storages in
// place. No tensors are written here, but the container should not differ
// from torch's own.
const Alignment = 64

// FileFormatVersion is the "version" record torch.save writes.
const FileFormatVersion = 3

// Record is one file inside the archive folder.
type Record struct {
	Name string // relative to the archive folder, e.g. "data.pkl"
	Data []byte
}

// dosDate1980 is 1980-01-01 in MS-DOS date format, the earliest valid
// date: a fixed timestamp keeps the archive byte-identical between runs.
const dosDate1980 = 1<<5 | 1

// paddingTag is the zip extra-field id torch uses for its alignment
// padding ("FB", little-endian 0x4246).
var paddingTag = [2]byte{'F', 'B'}

// Write writes a torch.save archive holding pkl as data.pkl, with the
// records torch.save writes, in its order. archive is the top-level folder
// name; torch names it after the file (state_dict.pt → "state_dict").
func Write(w io.Writer, archive string, pkl []byte) error {
	return WriteRecords(w, archive, StandardRecords(pkl))
}

// StandardRecords returns the records of a torch.save archive without
// tensors, in the order torch writes them: data.pkl, .format_version,
// .storage_alignment, byteorder (while pickling), then version and
// .data/serialization_id (when the writer closes).
func StandardRecords(pkl []byte) []Record {
	return []Record{
		{"data.pkl", pkl},
		{".format_version", []byte("1")},
		{".storage_alignment", []byte(strconv.Itoa(Alignment))},
		{"byteorder", []byte("little")},
		{"version", []byte(strconv.Itoa(FileFormatVersion) + "\n")},
		{".data/serialization_id", serializationID(pkl)},
	}
}

// serializationID stands in for the id torch draws at random per save: it
// only has to be stable for one file (mmap loading keys on it), so it is
// derived from the pickle, keeping the output deterministic. Same shape as
// torch's: 20 decimal digits.
func serializationID(pkl []byte) []byte {
	sum := sha256.Sum256(pkl)
	return fmt.Appendf(nil, "%020d", binary.BigEndian.Uint64(sum[:8]))
}

// WriteRecords writes records, in order, as stored entries under
// archive/, each one's data aligned to Alignment bytes.
func WriteRecords(w io.Writer, archive string, records []Record) error {
	if err := checkArchiveName(archive); err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	var cursor uint64 // offset of the next local header; the zip starts at 0
	seen := map[string]bool{}
	for _, r := range records {
		if r.Name == "" || strings.HasPrefix(r.Name, "/") || strings.HasSuffix(r.Name, "/") {
			return fmt.Errorf("torchzip: invalid record name %q", r.Name)
		}
		if seen[r.Name] {
			return fmt.Errorf("torchzip: record %q written twice", r.Name)
		}
		seen[r.Name] = true
		name := archive + "/" + r.Name
		extra := padding(cursor, len(name))
		fh := &zip.FileHeader{
			Name:               name,
			Method:             zip.Store,
			ReaderVersion:      20,
			ModifiedDate:       dosDate1980,
			CRC32:              crc32.ChecksumIEEE(r.Data),
			CompressedSize64:   uint64(len(r.Data)),
			UncompressedSize64: uint64(len(r.Data)),
			Extra:              extra,
		}
		// CreateRaw writes CRC and sizes into the local header and no data
		// descriptor, so the header's length is known up front and the
		// padding can be computed before writing it.
		fw, err := zw.CreateRaw(fh)
		if err != nil {
			return fmt.Errorf("torchzip: %s: %w", name, err)
		}
		if _, err := fw.Write(r.Data); err != nil {
			return fmt.Errorf("torchzip: %s: %w", name, err)
		}
		cursor += localHeaderLen + uint64(len(name)) + uint64(len(extra)) + uint64(len(r.Data))
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("torchzip: %w", err)
	}
	return nil
}

const localHeaderLen = 30

// padding returns torch's alignment extra field for a record whose local
// header starts at cursor: "FB", the pad length, and that many 'Z' bytes,
// so that the data after the header starts at a multiple of Alignment
// (torch's detail::getPadding). torch adds zip64 fields to that sum past
// 4 GiB; a tensor-free state_dict.pt never gets near it.
func padding(cursor uint64, nameLen int) []byte {
	start := cursor + localHeaderLen + uint64(nameLen) + 4
	pad := (Alignment - start%Alignment) % Alignment
	b := make([]byte, 4+pad)
	b[0], b[1] = paddingTag[0], paddingTag[1]
	binary.LittleEndian.PutUint16(b[2:], uint16(pad))
	for i := 4; i < len(b); i++ {
		b[i] = 'Z'
	}
	return b
}

func checkArchiveName(archive string) error {
	if archive == "" || strings.ContainsAny(archive, "/\\") || archive == "." || archive == ".." {
		return fmt.Errorf("torchzip: invalid archive folder name %q", archive)
	}
	return nil
}

// Archive is a torch.save archive as Read found it.
type Archive struct {
	Name    string            // the top-level folder
	Version int               // from "version" or ".data/version"
	Records map[string][]byte // by name relative to the folder
	Order   []string          // record names in archive order
}

// Pickle returns data.pkl.
func (a *Archive) Pickle() []byte { return a.Records["data.pkl"] }

// Read reads a torch.save archive, applying the rules of torch's reader:
// a zip whose entries all lie in one top-level folder (named by the first
// entry), stored uncompressed, with a data.pkl record and a version record
// ("version" or ".data/version") holding a supported version (1–10). It
// also rejects what torch never writes and a strict reader should not
// accept: directory entries, duplicate names, and a byteorder other than
// "little" or "big".
func Read(r io.ReaderAt, size int64) (*Archive, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("torchzip: not a zip archive: %w", err)
	}
	if len(zr.File) == 0 {
		return nil, errors.New("torchzip: archive does not contain any files")
	}
	first := zr.File[0].Name
	slash := strings.IndexByte(first, '/')
	if slash <= 0 {
		return nil, fmt.Errorf("torchzip: file in archive is not in a subdirectory: %s", first)
	}
	a := &Archive{Name: first[:slash], Records: map[string][]byte{}}
	prefix := a.Name + "/"
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			return nil, fmt.Errorf("torchzip: directory entry %q (torch writes none)", f.Name)
		}
		rel, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || rel == "" {
			return nil, fmt.Errorf("torchzip: %q is outside the archive folder %q", f.Name, a.Name)
		}
		if f.Method != zip.Store {
			return nil, fmt.Errorf("torchzip: %s is compressed (method %d); torch records are stored", f.Name, f.Method)
		}
		if _, dup := a.Records[rel]; dup {
			return nil, fmt.Errorf("torchzip: %s appears twice", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("torchzip: %s: %w", f.Name, err)
		}
		data, err := io.ReadAll(rc) // verifies the CRC at EOF
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("torchzip: %s: %w", f.Name, err)
		}
		a.Records[rel] = data
		a.Order = append(a.Order, rel)
	}
	if _, ok := a.Records["data.pkl"]; !ok {
		return nil, errors.New("torchzip: no data.pkl record")
	}
	v, ok := a.Records[".data/version"]
	if !ok {
		if v, ok = a.Records["version"]; !ok {
			return nil, errors.New("torchzip: no version record (version or .data/version)")
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(v)))
	if err != nil || n < 1 || n > 10 {
		return nil, fmt.Errorf("torchzip: version record %q is not a supported version (1–10)", v)
	}
	a.Version = n
	if bo, ok := a.Records["byteorder"]; ok && !bytes.Equal(bo, []byte("little")) && !bytes.Equal(bo, []byte("big")) {
		return nil, fmt.Errorf("torchzip: byteorder record is %q, want \"little\" or \"big\"", bo)
	}
	return a, nil
}
