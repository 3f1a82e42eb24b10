// Command kbuild renders a kustomization with kustomize's krusty, the
// library `kubectl apply -k` and `kustomize build` run, and prints the
// objects as YAML: `kbuild DIR`.
//
// It is a process of its own because krusty links Go's plugin package,
// which makes the linker bind every symbol at start; the deploycheck test
// binary also links go-nvml (through internal/cli), whose NVML symbols are
// resolved only when a GPU machine loads the library, and would not start.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kbuild DIR")
		os.Exit(2)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "kustomize build %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	y, err := m.AsYaml()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kustomize build %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	os.Stdout.Write(y)
}
