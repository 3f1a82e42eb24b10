// Package doccheck checks the project's Markdown documentation against the
// tree it describes, so that a newcomer following README.md and docs/*.md
// never meets a dead link or a command line the binaries refuse:
//
//   - every relative link and image (Markdown, or an HTML href/src)
//     resolves to a file or folder of the repository, and every #anchor
//     names a heading of its target as GitHub slugs it (lower case,
//     punctuation dropped, spaces to hyphens, -1, -2… for repeats);
//   - every `producer …` / `worker …` command line shown in a code block
//     (also as bin/producer, ./bin/worker, after "$ ", an environment
//     prefix, a pipe, && or ;, across \ continuations) parses against the
//     real cobra trees the mains build: the subcommand exists, every flag
//     exists on it, argument counts and required flags hold; a command named
//     in an inline code span must at least name a real subcommand and flags;
//   - every `make …` they show names targets the Makefile has.
//
// Markdown is read with goldmark (CommonMark + GFM) and shell with
// mvdan.cc/sh's parser, so quoting, continuations and comments are read as a
// reader's shell reads them. The command trees are passed in (Trees), so this
// package imports nothing of the product; its test binds them to
// internal/cli's NewProducer and NewWorker. It runs nothing and builds no
// binary.
package doccheck
