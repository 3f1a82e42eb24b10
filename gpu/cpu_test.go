package gpu

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Canned /proc/cpuinfo texts, trimmed to the lines the parser reads plus a
// few it must skip. Layout as printed by Linux's arch/x86/kernel/cpu/proc.c
// and arch/arm64/kernel/cpuinfo.c.

// Intel Xeon (Sapphire Rapids), one socket, two cores, two threads per core.
var cpuinfoXeon = func() string {
	var b strings.Builder
	flags := "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm 3dnowprefetch fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 wbnoinvd arat avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq rdpid cldemote movdiri movdir64b md_clear serialize amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities"
	for i, core := range []int{0, 1, 0, 1} {
		b.WriteString("processor\t: " + itoa(i) + "\n" +
			"vendor_id\t: GenuineIntel\n" +
			"cpu family\t: 6\n" +
			"model\t\t: 143\n" +
			"model name\t: Intel(R) Xeon(R) Platinum 8488C\n" +
			"stepping\t: 8\n" +
			"cpu MHz\t\t: 2400.000\n" +
			"cache size\t: 107520 KB\n" +
			"physical id\t: 0\n" +
			"siblings\t: 4\n" +
			"core id\t\t: " + itoa(core) + "\n" +
			"cpu cores\t: 2\n" +
			"flags\t\t: " + flags + "\n" +
			"bugs\t\t: spectre_v1 spectre_v2 spec_store_bypass swapgs eibrs_pbrsb\n" +
			"bogomips\t: 4800.00\n" +
			"power management:\n\n")
	}
	return b.String()
}()

// AMD EPYC (Milan), two sockets of two cores, no SMT; AVX2 but no AVX-512.
var cpuinfoEPYC = func() string {
	var b strings.Builder
	flags := "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 invpcid_single hw_pstate ssbd mba ibrs ibpb stibp vmmcall fsgsbase bmi1 avx2 smep bmi2 erms invpcid cqm rdt_a rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold v_vmsave_vmload vgif v_spec_ctrl umip pku ospke vaes vpclmulqdq rdpid overflow_recov succor smca fsrm"
	i := 0
	for _, sock := range []int{0, 1} {
		for _, core := range []int{0, 1} {
			b.WriteString("processor\t: " + itoa(i) + "\n" +
				"vendor_id\t: AuthenticAMD\n" +
				"cpu family\t: 25\n" +
				"model\t\t: 1\n" +
				"model name\t: AMD EPYC 7763 64-Core Processor\n" +
				"physical id\t: " + itoa(sock) + "\n" +
				"siblings\t: 2\n" +
				"core id\t\t: " + itoa(core) + "\n" +
				"cpu cores\t: 2\n" +
				"flags\t\t: " + flags + "\n\n")
			i++
		}
	}
	return b.String()
}()

// arm64 NVIDIA Grace (Neoverse V2): no model name, no topology lines.
const cpuinfoGrace = `processor	: 0
BogoMIPS	: 2000.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd4f
CPU revision	: 0

processor	: 1
BogoMIPS	: 2000.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd4f
CPU revision	: 0
`

// arm64 AWS Graviton2 (Neoverse N1) and an AmpereOne whose part is not in
// the table.
const cpuinfoGraviton2 = `processor	: 0
BogoMIPS	: 243.75
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1
`

const cpuinfoAmpereOne = `processor	: 0
BogoMIPS	: 2000.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp flagm2 frint i8mm bf16 rng bti ecv
CPU implementer	: 0xc0
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xac3
CPU revision	: 0
`

func itoa(i int) string { return string(rune('0' + i)) }

func TestParseCPUInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want CPU
		key  string
	}{
		{"intel xeon", cpuinfoXeon, CPU{
			Model: "Intel(R) Xeon(R) Platinum 8488C", Vendor: "Intel", Threads: 4, Cores: 2, Sockets: 1,
			Flags: []string{"amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_fp16", "avx512_vnni",
				"avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl", "avx_vnni", "f16c", "fma", "sse4_2"},
		}, "cpu-intel-xeon-platinum-8488c-amx-ort1.24.1"},
		{"amd epyc", cpuinfoEPYC, CPU{
			Model: "AMD EPYC 7763 64-Core Processor", Vendor: "AMD", Threads: 4, Cores: 4, Sockets: 2,
			Flags: []string{"avx", "avx2", "f16c", "fma", "sse4_2"},
		}, "cpu-amd-epyc-7763-64-core-avx2-ort1.24.1"},
		{"arm64 grace", cpuinfoGrace, CPU{
			Model: "ARM Neoverse-V2", Vendor: "ARM", Threads: 2,
			Flags: []string{"asimd", "asimddp", "asimdhp", "bf16", "fphp", "i8mm", "neon", "sve", "sve2", "svebf16", "svei8mm"},
		}, "cpu-arm-neoverse-v2-sve2-ort1.24.1"},
		{"arm64 graviton2", cpuinfoGraviton2, CPU{
			Model: "ARM Neoverse-N1", Vendor: "ARM", Threads: 1,
			Flags: []string{"asimd", "asimddp", "asimdhp", "fphp", "neon"},
		}, "cpu-arm-neoverse-n1-neon-ort1.24.1"},
		{"arm64 unknown part", cpuinfoAmpereOne, CPU{
			Model: "Ampere part 0xac3", Vendor: "Ampere", Threads: 1,
			Flags: []string{"asimd", "asimddp", "asimdhp", "bf16", "fphp", "i8mm", "neon"},
		}, "cpu-ampere-part-0xac3-neon-ort1.24.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCPUInfo(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Source = "/proc/cpuinfo"
			if got.Model != tc.want.Model || got.Vendor != tc.want.Vendor || got.Threads != tc.want.Threads ||
				got.Cores != tc.want.Cores || got.Sockets != tc.want.Sockets || got.Source != tc.want.Source ||
				!slices.Equal(got.Flags, tc.want.Flags) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			key := Fingerprint{Kind: KindCPU, CPU: got, ORTVersion: "1.24.1"}.PlatformKey()
			if key != tc.key {
				t.Errorf("key %q, want %q", key, tc.key)
			}
		})
	}
}

func TestParseCPUInfoRejectsGarbage(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "hello\nworld\n", "model name : x\n"} {
		if _, err := ParseCPUInfo(strings.NewReader(text)); err == nil {
			t.Errorf("ParseCPUInfo(%q): no error", text)
		}
	}
}

func TestDetectCPU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "cpuinfo")
	if err := os.WriteFile(p, []byte(cpuinfoEPYC), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := DetectCPU(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "AMD EPYC 7763 64-Core Processor" || c.Usable != runtime.NumCPU() {
		t.Errorf("DetectCPU(file) = %+v", c)
	}

	// A missing file on Linux is an error, but the CPUID fallback still
	// fills what it can.
	c, err = DetectCPU(filepath.Join(dir, "missing"))
	if runtime.GOOS == "linux" && err == nil {
		t.Error("missing cpuinfo: no error")
	}
	if c.Usable != runtime.NumCPU() || c.Source != "cpuid" {
		t.Errorf("fallback = %+v", c)
	}

	// This machine.
	c, err = DetectCPU("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Usable < 1 || (runtime.GOOS == "linux" && c.Threads < 1) {
		t.Errorf("DetectCPU(\"\") = %+v", c)
	}
	t.Logf("this machine: %+v", c)
}

func TestCPUIDFallback(t *testing.T) {
	t.Parallel()
	c := cpuFromCPUID()
	if c.Usable < 1 || c.Source != "cpuid" {
		t.Errorf("cpuFromCPUID() = %+v", c)
	}
	if runtime.GOARCH == "amd64" && !slices.Contains(c.Flags, "sse4_2") {
		t.Logf("no sse4_2 through CPUID: %v", c.Flags)
	}
	for _, f := range c.Flags {
		if !interesting[f] {
			t.Errorf("flag %q is not of interest", f)
		}
	}
}

func TestISATier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flags []string
		want  string
	}{
		{[]string{"sse4_2", "avx", "avx2", "avx512f", "amx_tile"}, "amx"},
		{[]string{"sse4_2", "avx2", "avx512f", "avx512_vnni"}, "avx512"},
		{[]string{"sse4_2", "avx", "avx2", "fma"}, "avx2"},
		{[]string{"sse4_2"}, "sse4"},
		{[]string{"asimd", "neon", "sve", "sve2"}, "sve2"},
		{[]string{"neon", "sve"}, "sve"},
		{[]string{"asimd"}, "neon"},
		{nil, ""},
	}
	for _, tc := range tests {
		if got := ISATier(tc.flags); got != tc.want {
			t.Errorf("ISATier(%q) = %q, want %q", tc.flags, got, tc.want)
		}
	}
	// Two VMs that both say "Intel(R) Xeon(R) Processor" but differ in
	// what the hypervisor exposes are different platforms.
	a := Fingerprint{Kind: KindCPU, CPU: CPU{Model: "Intel(R) Xeon(R) Processor", Flags: []string{"avx2", "avx512f", "amx_tile"}}, ORTVersion: "1.24.1"}
	b := a
	b.CPU.Flags = []string{"avx2"}
	if a.PlatformKey() == b.PlatformKey() {
		t.Errorf("AMX and AVX2-only VMs share key %q", a.PlatformKey())
	}
}
