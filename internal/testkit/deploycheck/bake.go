package deploycheck

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// BakeTarget is one target of docker-bake.hcl, its expressions evaluated
// and what it inherits merged in (its own attributes win, as in bake).
type BakeTarget struct {
	Name       string
	Context    string
	Dockerfile string
	Tags       []string
	Args       map[string]string
	Platforms  []string
	Inherits   []string
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
	own := map[string]BakeTarget{}
	var order []string
	for _, t := range file.Targets {
		var body struct {
			Inherits   []string          `hcl:"inherits,optional"`
			Context    string            `hcl:"context,optional"`
			Dockerfile string            `hcl:"dockerfile,optional"`
			Tags       []string          `hcl:"tags,optional"`
			Args       map[string]string `hcl:"args,optional"`
			Platforms  []string          `hcl:"platforms,optional"`
		}
		if diags := gohcl.DecodeBody(t.Remain, ctx, &body); diags.HasErrors() {
			return nil, fmt.Errorf("target %s: %w", t.Name, diags)
		}
		own[t.Name] = BakeTarget{Name: t.Name, Context: body.Context, Dockerfile: body.Dockerfile, Tags: body.Tags,
			Args: body.Args, Platforms: body.Platforms, Inherits: body.Inherits}
		order = append(order, t.Name)
	}
	var out []BakeTarget
	for _, name := range order {
		bt, err := resolve(own, name, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, bt)
	}
	return out, nil
}

// resolve merges what a target inherits (in order, later parents over
// earlier ones) under its own attributes; args merge key by key.
func resolve(own map[string]BakeTarget, name string, seen []string) (BakeTarget, error) {
	if slices.Contains(seen, name) {
		return BakeTarget{}, fmt.Errorf("target %s inherits itself (%v)", name, append(seen, name))
	}
	t, ok := own[name]
	if !ok {
		return BakeTarget{}, fmt.Errorf("target %s is inherited but not defined", name)
	}
	var merged BakeTarget
	for _, p := range t.Inherits {
		parent, err := resolve(own, p, append(seen, name))
		if err != nil {
			return BakeTarget{}, err
		}
		merged = overlay(merged, parent)
	}
	merged = overlay(merged, t)
	merged.Name, merged.Inherits = name, t.Inherits
	return merged, nil
}

func overlay(base, top BakeTarget) BakeTarget {
	if top.Context != "" {
		base.Context = top.Context
	}
	if top.Dockerfile != "" {
		base.Dockerfile = top.Dockerfile
	}
	if top.Tags != nil {
		base.Tags = top.Tags
	}
	if top.Platforms != nil {
		base.Platforms = top.Platforms
	}
	if len(top.Args) > 0 {
		args := maps.Clone(base.Args)
		if args == nil {
			args = map[string]string{}
		}
		maps.Copy(args, top.Args)
		base.Args = args
	}
	return base
}
