package aitune

import (
	"fmt"
	"slices"

	"github.com/tunefleet/tunefleet/internal/jsontree"
)

// skeleton reads output_skeleton: a scalar leaf (null where a tensor
// goes), or {"list": […]}, {"tuple": […]}, {"dict": {…}} (the schema
// checked the form; dict order is kept, it is a Python dict's).
func (c *checker) skeleton(n *jsontree.Node, where string) (Skeleton, bool) {
	if n.Kind != jsontree.Object {
		s, ok := c.scalar(n, where)
		return Skeleton{Kind: SkeletonLeaf, Leaf: s}, ok
	}
	// The schema allows exactly one container key, plus class (tuple,
	// dict) and state (dict with class).
	var k string
	var v *jsontree.Node
	s := Skeleton{Kind: SkeletonDict}
	good := true
	for i, key := range n.Keys {
		switch key {
		case "list", "tuple", "dict":
			k, v = key, n.Vals[i]
		case "class":
			s.Class = &Class{}
			for j, ck := range n.Vals[i].Keys {
				if ck == "module" {
					s.Class.Module = n.Vals[i].Vals[j].Str
				} else {
					s.Class.Qualname = n.Vals[i].Vals[j].Str
				}
			}
		}
	}
	if st, ok := n.Get("state"); ok {
		state, ok := c.skeleton(st, jsontree.Member(where, "state"))
		good = good && ok
		if state.Kind != SkeletonDict || state.Class != nil {
			c.addf(jsontree.Member(where, "state"), "want a plain dict of the instance's attributes ({\"dict\": {…}})")
			good = false
		}
		s.State = &state
	}
	cw := jsontree.Member(where, k)
	switch k {
	case "list":
		s.Kind = SkeletonList
	case "tuple":
		s.Kind = SkeletonTuple
	}
	if s.Kind == SkeletonDict {
		for i, key := range v.Keys {
			item, ok := c.skeleton(v.Vals[i], jsontree.Member(cw, key))
			good = good && ok
			s.Keys = append(s.Keys, key)
			s.Items = append(s.Items, item)
		}
		return s, good
	}
	for i, e := range v.Arr {
		item, ok := c.skeleton(e, fmt.Sprintf("%s[%d]", cw, i))
		good = good && ok
		s.Items = append(s.Items, item)
	}
	return s, good
}

// resolveOutputs checks that every output locator lands on a None leaf of
// the skeleton (AITune overwrites it with the tensor), and derives the
// other leaves as the output's other_data in strict mode.
func (c *checker) resolveOutputs(g *BlockGraph) {
	taken := map[*Skeleton]bool{}
	for _, t := range g.Outputs {
		leaf, err := g.Skeleton.at(t.Locator.Path)
		if err != "" {
			c.addf(t.where+".path", "%s in output_skeleton: %s", t.Locator, err)
			continue
		}
		if leaf.Kind != SkeletonLeaf {
			c.addf(t.where+".path", "%s is a container in output_skeleton, not a tensor leaf", t.Locator)
			continue
		}
		if leaf.Leaf.Kind != ScalarNone {
			c.addf(t.where+".path", "%s holds %s in output_skeleton; a tensor's place holds null", t.Locator, leaf.Leaf)
			continue
		}
		taken[leaf] = true
	}
	if !g.Strict {
		return
	}
	// Breadth-first like AITune's Locator.find_leaves.
	type item struct {
		s    *Skeleton
		path []Step
	}
	queue := []item{{&g.Skeleton, nil}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		switch it.s.Kind {
		case SkeletonLeaf:
			if !taken[it.s] {
				g.OtherOutputs = append(g.OtherOutputs, OtherValue{Locator: Locator{Path: it.path, IsOutput: true}, Value: it.s.Leaf})
			}
		case SkeletonList, SkeletonTuple:
			for i := range it.s.Items {
				queue = append(queue, item{&it.s.Items[i], append(slices.Clip(it.path), Step{Index(int64(i)), Sequence})})
			}
		case SkeletonDict:
			for i, k := range it.s.Keys {
				queue = append(queue, item{&it.s.Items[i], append(slices.Clip(it.path), Step{Name(k), DictKey})})
			}
		}
	}
}

// at follows a path through the skeleton; the error is "" on success.
func (s *Skeleton) at(path []Step) (*Skeleton, string) {
	cur := s
	for i, st := range path {
		switch {
		case st.Type == Sequence && (cur.Kind == SkeletonList || cur.Kind == SkeletonTuple):
			if st.Key.Index >= int64(len(cur.Items)) {
				return nil, fmt.Sprintf("step %d: index %d is out of range (%d items)", i, st.Key.Index, len(cur.Items))
			}
			cur = &cur.Items[st.Key.Index]
		case st.Type == DictKey && cur.Kind == SkeletonDict:
			if st.Key.IsIndex {
				return nil, fmt.Sprintf("step %d: skeleton dict keys are strings, the path has the integer key %d", i, st.Key.Index)
			}
			j := slices.Index(cur.Keys, st.Key.Name)
			if j < 0 {
				return nil, fmt.Sprintf("step %d: no key %q", i, st.Key.Name)
			}
			cur = &cur.Items[j]
		default:
			return nil, fmt.Sprintf("step %d: a %s step meets %s", i, st.Type, cur.kindName())
		}
	}
	return cur, ""
}

func (s *Skeleton) kindName() string {
	switch s.Kind {
	case SkeletonList:
		return "a list"
	case SkeletonTuple:
		return "a tuple"
	case SkeletonDict:
		return "a dict"
	}
	return "a leaf"
}
