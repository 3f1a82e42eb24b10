package deploycheck

import (
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// BakeTarget is one target of docker-bake.hcl, its expressions evaluated.
type BakeTarget struct {
	Name       string
	Dockerfile string
	Tags       []string
}

// LoadBake reads a `docker buildx bake` file with HCL (the language bake
// reads) and evaluates its targets with its variables: their defaults,
// overridden by env as bake does with the environment.
func LoadBake(path string, env map[string]string) ([]BakeTarget, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, diags := hclparse.NewParser().ParseHCL(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	var file struct {
		Variables []struct {
			Name    string         `hcl:"name,label"`
			Default hcl.Expression `hcl:"default,optional"`
		} `hcl:"variable,block"`
		Groups []struct {
			Name    string   `hcl:"name,label"`
			Targets []string `hcl:"targets"`
		} `hcl:"group,block"`
		Targets []struct {
			Name   string   `hcl:"name,label"`
			Remain hcl.Body `hcl:",remain"`
		} `hcl:"target,block"`
	}
	if diags := gohcl.DecodeBody(f.Body, nil, &file); diags.HasErrors() {
		return nil, diags
	}
	vars := map[string]cty.Value{}
	for _, v := range file.Variables {
		if val, ok := env[v.Name]; ok {
			vars[v.Name] = cty.StringVal(val)
			continue
		}
		val, diags := v.Default.Value(nil)
		if diags.HasErrors() {
			return nil, diags
		}
		vars[v.Name] = val
	}
	ctx := &hcl.EvalContext{Variables: vars}
	var out []BakeTarget
	for _, t := range file.Targets {
		var body struct {
			Context    string            `hcl:"context,optional"`
			Dockerfile string            `hcl:"dockerfile,optional"`
			Tags       []string          `hcl:"tags,optional"`
			Args       map[string]string `hcl:"args,optional"`
			Platforms  []string          `hcl:"platforms,optional"`
		}
		if diags := gohcl.DecodeBody(t.Remain, ctx, &body); diags.HasErrors() {
			return nil, fmt.Errorf("target %s: %w", t.Name, diags)
		}
		out = append(out, BakeTarget{Name: t.Name, Dockerfile: body.Dockerfile, Tags: body.Tags})
	}
	return out, nil
}
