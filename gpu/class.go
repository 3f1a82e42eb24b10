package gpu

import (
	"regexp"
	"strings"
)

// classNoise are name tokens that say nothing about the GPU model: the
// vendor and product-line words, form factors, memory kinds and edition
// words. "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe" and
// "Mock NVIDIA A100-SXM4-40GB" are all class gpu.a100.
var classNoise = map[string]bool{
	"mock": true, "nvidia": true, "tesla": true, "geforce": true, "quadro": true,
	"pcie": true, "sxm": true, "sxm2": true, "sxm3": true, "sxm4": true, "sxm5": true, "sxm6": true,
	"nvl": true, "hbm": true, "hbm2": true, "hbm2e": true, "hbm3": true, "hbm3e": true,
	"server": true, "workstation": true, "edition": true, "generation": true,
	"gpu": true, "graphics": true, "device": true, "laptop": true, "mobile": true,
	"max": true, "q": true,
}

// memoryToken matches "80gb", "16g", "48gb".
var memoryToken = regexp.MustCompile(`^[0-9]+gb?$`)

// DefaultClass is the target class for a GPU name: "gpu." followed by the
// model, e.g. "NVIDIA H100 80GB HBM3" → "gpu.h100", "NVIDIA A100-SXM4-40GB" →
// "gpu.a100", "NVIDIA GeForce RTX 3090" → "gpu.rtx3090", "NVIDIA L4" →
// "gpu.l4", "NVIDIA RTX 6000 Ada Generation" → "gpu.rtx6000ada". Memory
// size and form factor do not split a class (an H100 PCIe and an H100 SXM
// serve gpu.h100; their platform keys still differ). A name with nothing
// recognisable gives "gpu". Classes hold only [a-z0-9.] and are at most 64
// characters long, so they are valid queue names.
func DefaultClass(name string) string {
	var model strings.Builder
	for _, tok := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		if classNoise[tok] || memoryToken.MatchString(tok) {
			continue
		}
		model.WriteString(tok)
	}
	m := model.String()
	if m == "" {
		return "gpu"
	}
	if len(m) > 60 {
		m = m[:60]
	}
	return "gpu." + m
}
