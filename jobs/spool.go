package jobs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// spoolInMemory is how much of one output a finalize holds in memory
// before it writes the output to a file: a run of a few hundred graphs
// finalizes without touching the disk, a larger one in bounded memory.
const spoolInMemory = 1 << 20

// spoolBuffers are the spools' memory, kept from one finalize to the
// next: a worker finalizes run after run, and each finalize's half-dozen
// outputs grew fresh buffers by doubling up to a megabyte, whose zeroing
// and page faults cost a fifth of a 100-graph finalize's CPU.
var spoolBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putSpoolBuffer returns b to spoolBuffers, empty; no larger than a spool
// keeps in memory (its last write may have grown it past that).
func putSpoolBuffer(b *bytes.Buffer) {
	if b.Cap() > 2*spoolInMemory {
		return
	}
	b.Reset()
	spoolBuffers.Put(b)
}

// spools are the outputs a finalize writes before it uploads them
// (state.json, report.html, the history entry, and their graphs' parts),
// each held in memory until it passes spoolInMemory, then written to a
// file of a scratch directory in the worker's work directory, made by the
// first such file. remove deletes them all; should the worker die first,
// the next one on the work directory removes the directory
// (removeStaleScratch).
type spools struct {
	workDir string
	mu      sync.Mutex
	dir     string // "" until a spool needs a file
	all     []*spool
}

func newSpools(workDir string) *spools { return &spools{workDir: workDir} }

// spool is one output: written once, then read (reader) as often as it
// is uploaded.
type spool struct {
	sps  *spools
	name string
	mem  *bytes.Buffer // nil once the output is in its file, or dropped
	f    *os.File
	w    *bufio.Writer
	size int64
	// mu orders the readers' first flush of w (two uploads of one output
	// start at once).
	mu sync.Mutex
}

// new starts an output named name (its file's name, should it need one).
func (sps *spools) new(name string) *spool {
	s := &spool{sps: sps, name: name, mem: spoolBuffers.Get().(*bytes.Buffer)}
	sps.mu.Lock()
	sps.all = append(sps.all, s)
	sps.mu.Unlock()
	return s
}

// file makes a file for s in the scratch directory, making the directory
// first if it is not there yet.
func (sps *spools) file(name string) (*os.File, error) {
	sps.mu.Lock()
	defer sps.mu.Unlock()
	if sps.dir == "" {
		dir, err := newScratch(sps.workDir)
		if err != nil {
			return nil, fmt.Errorf("finalize's scratch directory: %w", err)
		}
		sps.dir = dir
	}
	return os.Create(filepath.Join(sps.dir, name))
}

// remove deletes every output's file and the scratch directory.
func (sps *spools) remove() {
	sps.mu.Lock()
	all, dir := sps.all, sps.dir
	sps.mu.Unlock()
	for _, s := range all {
		s.drop()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
}

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && s.mem.Len()+len(p) > spoolInMemory {
		f, err := s.sps.file(s.name)
		if err != nil {
			return 0, err
		}
		s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
		if _, err := s.w.Write(s.mem.Bytes()); err != nil {
			return 0, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		putSpoolBuffer(s.mem)
		s.mem = nil
	}
	var n int
	var err error
	if s.w != nil {
		n, err = s.w.Write(p)
		if err != nil {
			err = fmt.Errorf("write %s: %w", s.f.Name(), err)
		}
	} else {
		n, _ = s.mem.Write(p)
	}
	s.size += int64(n)
	return n, err
}

// reader reads the output from its start; each call gives a reader of its
// own (two uploads of one output run at once). Nothing may be written
// after it.
func (s *spool) reader() (*io.SectionReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w != nil {
		if err := s.w.Flush(); err != nil {
			return nil, fmt.Errorf("write %s: %w", s.f.Name(), err)
		}
		return io.NewSectionReader(s.f, 0, s.size), nil
	}
	return io.NewSectionReader(bytes.NewReader(s.mem.Bytes()), 0, s.size), nil
}

// drop frees the output: its memory, its file.
func (s *spool) drop() {
	if s.mem != nil {
		putSpoolBuffer(s.mem)
		s.mem = nil
	}
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
		s.f, s.w = nil, nil
	}
}
