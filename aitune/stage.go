package aitune

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tunefleet/tunefleet/aitune/pickle"
)

// The staging directory a checkpoint is written into: files, their sums,
// the backends' artifacts and the final archive.

// fileSum is what is known of a staged file.
type fileSum struct {
	size   int64
	sha256 string
	crc32  uint32
}

func sumOf(b []byte) fileSum {
	s := sha256.Sum256(b)
	return fileSum{size: int64(len(b)), sha256: hex.EncodeToString(s[:]), crc32: crc32.ChecksumIEEE(b)}
}

// stager writes the checkpoint folder, hashing each file once as it goes:
// engines can be gigabytes, and the sums file, the archive's CRCs and the
// manifest all need the same digests.
type stager struct {
	root  string
	files map[string]fileSum // by folder-relative slash path
}

func (w *stager) write(rel string, data []byte) error {
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	w.files[rel] = sumOf(data)
	return nil
}

func (w *stager) copy(rel, src string) error {
	dst := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	sha, crc := sha256.New(), crc32.NewIEEE()
	n, err := io.Copy(io.MultiWriter(out, sha, crc), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("aitune: copying %s: %w", src, err)
	}
	w.files[rel] = fileSum{size: n, sha256: hex.EncodeToString(sha.Sum(nil)), crc32: crc.Sum32()}
	return nil
}

// backend stages backend k's artifacts and returns its backends pair.
func (w *stager) backend(k int, p *graphPlan, block *Block, opts Options) (pickle.Dict, pickle.Dict, error) {
	in, out, err := graphSpecs(p.bg, p.g.Decl)
	if err != nil {
		return nil, nil, fmt.Errorf("aitune: graph %q: %w", p.g.Name, err)
	}
	key, err := in.dict()
	if err != nil {
		return nil, nil, fmt.Errorf("aitune: graph %q: %w", p.g.Name, err)
	}
	spec := graphSpecDict(block, p.bg, in, out)
	dir := strconv.Itoa(k) + "/1/"
	p.files = BackendFiles{Graph: p.g.Name, Index: k}
	var d pickle.Dict
	switch p.g.Backend {
	case BackendTRT:
		engine, profiles := dir+"tensorrt/model.plan", dir+"tensorrt/model_optimization_profiles.json"
		if err := w.copy(engine, p.g.EngineFile); err != nil {
			return nil, nil, err
		}
		if err := w.write(profiles, profilesJSON(p.profiles)); err != nil {
			return nil, nil, err
		}
		p.files.Type, p.files.Artifacts = "TensorRTBackend", []string{engine, profiles}
		// Key order of TensorRTBackend.to_dict().
		d = pickle.D(
			"type", pickle.Str("TensorRTBackend"),
			"engine_path", artifactValue(engine),
			"output_object", skeletonValue(p.bg.Skeleton),
			"graph_spec", spec,
			"device", deviceValue(opts.DeviceIndex),
			"quantization_config", pickle.None{},
			"config", trtConfigValue(opts.UseCUDAGraphs),
			"use_cuda_graphs", pickle.Bool(opts.UseCUDAGraphs),
			"trt_optimization_profiles_path", artifactValue(profiles),
		)
	case BackendORT:
		model := dir + "model_raw.onnx"
		if p.relocated != nil {
			if err := w.write(model, p.relocated.model); err != nil {
				return nil, nil, err
			}
		} else if err := w.copy(model, p.g.EngineFile); err != nil {
			return nil, nil, err
		}
		p.files.Type, p.files.Artifacts = "ONNXRuntimeBackend", []string{model}
		var ep pickle.Value = pickle.None{}
		if p.g.ExecutionProvider != "" {
			ep = pickle.Str(p.g.ExecutionProvider) // from_dict accepts the enum's value
		}
		// Key order of ONNXRuntimeBackend.to_dict().
		d = pickle.D(
			"type", pickle.Str("ONNXRuntimeBackend"),
			"config", pickle.D("use_dynamo", pickle.Bool(true), "execution_provider", ep, "opset_version", pickle.None{}),
			"onnx_model_path", artifactValue(model),
			"output_object", skeletonValue(p.bg.Skeleton),
			"graph_spec", spec,
			"device", deviceValue(opts.DeviceIndex),
		)
		if p.g.ONNXDataFile != "" || p.relocated != nil {
			data := dir + ortDataName
			var err error
			if p.relocated != nil {
				err = w.concat(data, p.g.ExternalData, p.relocated)
			} else {
				err = w.copy(data, p.g.ONNXDataFile)
			}
			if err != nil {
				return nil, nil, err
			}
			p.files.Artifacts = append(p.files.Artifacts, data)
			d = append(d, pickle.Item{Key: pickle.Str("onnx_data_path"), Value: artifactValue(data)})
		}
	}
	return key, d, nil
}

// sortedFiles returns the staged files in the order Python sorts Paths:
// component by component, so "a/x" sorts before "a-b/x" although '-' < '/'.
func (w *stager) sortedFiles() []string {
	rels := make([]string, 0, len(w.files))
	for rel := range w.files {
		rels = append(rels, rel)
	}
	slices.SortFunc(rels, comparePaths)
	return rels
}

func comparePaths(a, b string) int {
	return slices.Compare(strings.Split(a, "/"), strings.Split(b, "/"))
}

// sums is ShaSumsSaveTask's file: "<hex>␠␠<posix path>\n" per file of the
// folder, sorted, the sums file itself excluded (it does not exist yet
// when AITune lists the folder).
func (w *stager) sums() []byte {
	var b bytes.Buffer
	for _, rel := range w.sortedFiles() {
		fmt.Fprintf(&b, "%s  %s\n", w.files[rel].sha256, rel)
	}
	return b.Bytes()
}

// archive writes ZipSaveTask's <name>.ait: every file of the folder,
// stored, under its folder-relative name, no directory entries. Entries
// are sorted and timestamps fixed so the archive is byte-for-byte
// reproducible (Python lists the folder in directory order and stamps
// file times; neither matters to the loader).
func (w *stager) archive(dst string) (fileSum, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fileSum{}, fmt.Errorf("aitune: %w", err)
	}
	defer f.Close()
	sha, crc := sha256.New(), crc32.NewIEEE()
	cw := &countWriter{w: io.MultiWriter(f, sha, crc)}
	zw := zip.NewWriter(cw)
	for _, rel := range w.sortedFiles() {
		fs := w.files[rel]
		fh := &zip.FileHeader{
			Name:               rel,
			Method:             zip.Store,
			CreatorVersion:     3<<8 | 20, // made by Unix, as Python's zipfile on Linux
			ReaderVersion:      20,
			ModifiedDate:       1<<5 | 1, // 1980-01-01 00:00
			CRC32:              fs.crc32,
			CompressedSize64:   uint64(fs.size),
			UncompressedSize64: uint64(fs.size),
			ExternalAttrs:      0o100644 << 16, // regular file, rw-r--r--
		}
		if !isASCII(rel) {
			fh.Flags |= 0x800 // UTF-8 name
		}
		zf, err := zw.CreateRaw(fh)
		if err != nil {
			return fileSum{}, fmt.Errorf("aitune: %s: %w", dst, err)
		}
		if err := copyFileTo(zf, filepath.Join(w.root, filepath.FromSlash(rel))); err != nil {
			return fileSum{}, err
		}
	}
	if err := zw.Close(); err != nil {
		return fileSum{}, fmt.Errorf("aitune: %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return fileSum{}, fmt.Errorf("aitune: %s: %w", dst, err)
	}
	return fileSum{size: cw.n, sha256: hex.EncodeToString(sha.Sum(nil)), crc32: crc.Sum32()}, nil
}

func copyFileTo(w io.Writer, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("aitune: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("aitune: %s: %w", path.Base(src), err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
