package doccheck

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// Doc is one Markdown file as the checks need it.
type Doc struct {
	Path    string      // as given to Parse (repository-relative, slash-separated)
	Anchors []string    // heading slugs, in order, as GitHub makes them
	Links   []Link      // link and image destinations
	Blocks  []CodeBlock // fenced and indented code blocks
	Inline  []Span      // inline code spans
	// StrayRows are lines of running text that look like table rows
	// ("| … |") but are no table's: a row pasted away from its table, or a
	// table without its header and |---| line, which GitHub shows as
	// one run of pipes and words. A row written without its outer pipes
	// (a | b), which GFM also allows, reads as prose and is not found.
	StrayRows []Span
	Tables    int // GFM tables
	numLines  int
}

// Link is one link or image destination.
type Link struct {
	Dest string
	Line int
}

// CodeBlock is one code block: its info string's first word ("sh",
// "console", "" …), its text and the line of its first text line.
type CodeBlock struct {
	Lang string
	Text string
	Line int
}

// Span is one inline code span's text.
type Span struct {
	Text string
	Line int
}

// Lines is the file's line count.
func (d *Doc) Lines() int { return d.numLines }

var md = goldmark.New(goldmark.WithExtensions(extension.GFM))

// Parse reads one Markdown file's headings, links and code.
func Parse(path string, src []byte) *Doc {
	d := &Doc{Path: path, numLines: bytes.Count(src, []byte("\n"))}
	if len(src) > 0 && src[len(src)-1] != '\n' {
		d.numLines++
	}
	lineAt := func(off int) int { return bytes.Count(src[:min(off, len(src))], []byte("\n")) + 1 }
	seen := map[string]int{}
	// The nearest block's first line: inline nodes carry no position.
	blockLine := 1
	root := md.Parser().Parse(text.NewReader(src))
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
			blockLine = lineAt(n.Lines().At(0).Start)
		}
		switch n := n.(type) {
		case *ast.Heading:
			slug := Slug(plainText(n, src))
			if k := seen[slug]; k > 0 {
				seen[slug] = k + 1
				slug = fmt.Sprintf("%s-%d", slug, k)
			} else {
				seen[slug] = 1
			}
			d.Anchors = append(d.Anchors, slug)
		case *ast.Link:
			d.Links = append(d.Links, Link{Dest: string(n.Destination), Line: blockLine})
		case *ast.Image:
			d.Links = append(d.Links, Link{Dest: string(n.Destination), Line: blockLine})
		case *ast.FencedCodeBlock:
			lang := string(n.Language(src))
			d.Blocks = append(d.Blocks, CodeBlock{Lang: lang, Text: linesOf(n, src), Line: blockLine})
			return ast.WalkSkipChildren, nil
		case *ast.CodeBlock:
			d.Blocks = append(d.Blocks, CodeBlock{Text: linesOf(n, src), Line: blockLine})
			return ast.WalkSkipChildren, nil
		case *ast.HTMLBlock:
			d.Links = append(d.Links, htmlLinks(linesOf(n, src), blockLine)...)
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			var b strings.Builder
			for i := 0; i < n.Segments.Len(); i++ {
				seg := n.Segments.At(i)
				b.Write(seg.Value(src))
			}
			d.Links = append(d.Links, htmlLinks(b.String(), blockLine)...)
		case *ast.CodeSpan:
			d.Inline = append(d.Inline, Span{Text: plainText(n, src), Line: blockLine})
			return ast.WalkSkipChildren, nil
		case *east.Table:
			d.Tables++
		case *ast.Paragraph, *ast.TextBlock:
			for i := 0; i < n.Lines().Len(); i++ {
				seg := n.Lines().At(i)
				if l := strings.TrimSpace(string(seg.Value(src))); len(l) > 1 && strings.HasPrefix(l, "|") && strings.HasSuffix(l, "|") {
					d.StrayRows = append(d.StrayRows, Span{Text: l, Line: lineAt(seg.Start)})
				}
			}
		}
		return ast.WalkContinue, nil
	})
	return d
}

// htmlAttr finds the link targets of raw HTML (<a href>, <img src>).
var htmlAttr = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*(?:"([^"]*)"|'([^']*)')`)

func htmlLinks(html string, line int) []Link {
	var out []Link
	for _, m := range htmlAttr.FindAllStringSubmatch(html, -1) {
		out = append(out, Link{Dest: m[1] + m[2], Line: line})
	}
	return out
}

func linesOf(n ast.Node, src []byte) string {
	var b strings.Builder
	for i := 0; i < n.Lines().Len(); i++ {
		seg := n.Lines().At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

// plainText is a node's text as rendered: code spans' contents, links'
// text, emphasis without its marks; raw HTML left out (GitHub slugs the
// rendered heading).
func plainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Segment.Value(src))
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// Slug is a heading's anchor as GitHub makes it (github-slugger): lower
// case; every character that is not a letter, mark, number, space, hyphen
// or underscore dropped; each space a hyphen. Repeats get -1, -2, … (Parse).
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
