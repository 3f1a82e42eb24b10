package tritoncheck

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ProtoPath is Triton's model_config.proto as the tests see it (beside the
// checkout, as CI lays shared/ out).
func ProtoPath(tb testing.TB) string {
	tb.Helper()
	for _, rel := range []string{"../shared", "../../shared", "../../../shared", "../../../../shared"} {
		p, err := filepath.Abs(filepath.Join(rel, "oracles", "triton", "model_config.proto"))
		if err == nil {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	tb.Fatal("../shared/oracles/triton/model_config.proto not found (lay shared/ beside the checkout)")
	return ""
}

var (
	once    sync.Once
	desc    protoreflect.MessageDescriptor
	loadErr error
)

// ModelConfig compiles model_config.proto (once) and returns the
// inference.ModelConfig message descriptor.
func ModelConfig(tb testing.TB) protoreflect.MessageDescriptor {
	tb.Helper()
	path := ProtoPath(tb)
	once.Do(func() {
		c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{ImportPaths: []string{filepath.Dir(path)}})}
		files, err := c.Compile(context.Background(), filepath.Base(path))
		if err != nil {
			loadErr = err
			return
		}
		d := files[0].Messages().ByName("ModelConfig")
		if d == nil {
			loadErr = fmt.Errorf("%s has no message ModelConfig", path)
			return
		}
		desc = d
	})
	if loadErr != nil {
		tb.Fatalf("compile Triton's model_config.proto: %v", loadErr)
	}
	return desc
}

// Parse parses config.pbtxt text strictly into an inference.ModelConfig.
func Parse(tb testing.TB, text []byte) (protoreflect.Message, error) {
	m := dynamicpb.NewMessage(ModelConfig(tb))
	if err := (prototext.UnmarshalOptions{}).Unmarshal(text, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Parsed gives field access by name on a parsed config.
type msg struct{ m protoreflect.Message }

func (x msg) f(name string) protoreflect.FieldDescriptor {
	fd := x.m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("no field " + name + " in " + string(x.m.Descriptor().FullName()))
	}
	return fd
}
func (x msg) str(name string) string             { return x.m.Get(x.f(name)).String() }
func (x msg) int(name string) int64              { return x.m.Get(x.f(name)).Int() }
func (x msg) has(name string) bool               { return x.m.Has(x.f(name)) }
func (x msg) sub(name string) msg                { return msg{x.m.Get(x.f(name)).Message()} }
func (x msg) list(name string) protoreflect.List { return x.m.Get(x.f(name)).List() }
func (x msg) enum(name string) string {
	fd := x.f(name)
	v := fd.Enum().Values().ByNumber(x.m.Get(fd).Enum())
	if v == nil {
		return strconv.Itoa(int(x.m.Get(fd).Enum()))
	}
	return string(v.Name())
}
func (x msg) msgs(name string) []msg {
	l := x.list(name)
	out := make([]msg, l.Len())
	for i := range out {
		out[i] = msg{l.Get(i).Message()}
	}
	return out
}
func (x msg) ints(name string) []int64 {
	l := x.list(name)
	out := make([]int64, l.Len())
	for i := range out {
		out[i] = l.Get(i).Int()
	}
	return out
}
func (x msg) strs(name string) []string {
	l := x.list(name)
	out := make([]string, l.Len())
	for i := range out {
		out[i] = l.Get(i).String()
	}
	return out
}

// Tensor is one input or output as the config declares it.
type Tensor struct {
	Name     string
	DataType string
	Dims     []int64
	Reshape  []int64 // nil: no reshape
}

// Config is what tests compare against the model itself.
type Config struct {
	Name, Platform, Backend, File string
	MaxBatchSize                  int64
	Inputs, Outputs               []Tensor
	Preferred                     []int64
	Kinds                         []string
	Profiles                      []string
	GraphLevel                    *int64
	// Parameters are the config's parameters (key → string_value).
	Parameters map[string]string
}

// Summary reads what tests compare from a parsed config.
func Summary(m protoreflect.Message) Config {
	x := msg{m}
	c := Config{Name: x.str("name"), Platform: x.str("platform"), Backend: x.str("backend"), File: x.str("default_model_filename"), MaxBatchSize: x.int("max_batch_size")}
	tensors := func(field string) []Tensor {
		var out []Tensor
		for _, io := range x.msgs(field) {
			t := Tensor{Name: io.str("name"), DataType: io.enum("data_type"), Dims: io.ints("dims")}
			if io.has("reshape") {
				t.Reshape = append([]int64{}, io.sub("reshape").ints("shape")...)
			}
			out = append(out, t)
		}
		return out
	}
	c.Inputs, c.Outputs = tensors("input"), tensors("output")
	if x.has("dynamic_batching") {
		c.Preferred = x.sub("dynamic_batching").ints("preferred_batch_size")
	}
	for _, g := range x.msgs("instance_group") {
		c.Kinds = append(c.Kinds, g.enum("kind"))
		c.Profiles = append(c.Profiles, g.strs("profile")...)
	}
	if x.has("optimization") && x.sub("optimization").has("graph") {
		l := x.sub("optimization").sub("graph").int("level")
		c.GraphLevel = &l
	}
	x.m.Get(x.f("parameters")).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		if c.Parameters == nil {
			c.Parameters = map[string]string{}
		}
		c.Parameters[k.String()] = msg{v.Message()}.str("string_value")
		return true
	})
	return c
}
