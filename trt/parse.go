package trt

import (
	"bufio"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits that keep a hostile or broken log from exhausting memory.
const (
	maxLineBytes   = 1 << 20
	maxEntryBytes  = 16 << 10
	maxErrors      = 500
	maxWarnings    = 2000
	maxUnprefixed  = 64
	maxLayerRows   = 100000
	maxOptionPairs = 2000
	maxBindings    = 10000
)

type section int

const (
	secNone section = iota
	secOptions
	secDevice
	secSummary
	secProfile
	secOther
)

type parser struct {
	l        *Log
	sec      section
	secName  string
	lastSev  byte // severity of the last prefixed line
	lastWarn int  // index of the last warning, -1 if the last line was not one
	pairs    int
}

// Parse reads a trtexec log (stdout and stderr, merged or not). It never
// fails on content, only when r fails, and never panics: anything it does
// not recognise is skipped.
func Parse(r io.Reader) (*Log, error) {
	p := &parser{l: &Log{}, lastWarn: -1}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 || err == nil {
			p.line(line)
		}
		if err == io.EOF {
			return p.l, nil
		}
		if err != nil {
			return p.l, err
		}
	}
}

// readLine returns the next line without its end, cut at maxLineBytes.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) <= maxLineBytes {
			buf = append(buf, frag...)
		} else if len(buf) < maxLineBytes {
			buf = append(buf, frag[:maxLineBytes-len(buf)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(buf) == 0 {
			return "", io.EOF
		}
		return strings.TrimRight(string(buf), "\r\n"), err
	}
}

// splitPrefix splits "[08/09/2024-23:19:08] [I] [TRT] text" into severity,
// whether the message came from the TensorRT library, and text. ok is false
// for a line without the prefix.
func splitPrefix(line string) (sev byte, trt bool, text string, ok bool) {
	// [MM/DD/YYYY-HH:MM:SS] is 21 bytes, then " [S]".
	if len(line) < 25 || line[0] != '[' || line[20] != ']' || line[21] != ' ' || line[22] != '[' || line[24] != ']' {
		return 0, false, "", false
	}
	for i := 1; i < 20; i++ {
		c := line[i]
		switch i {
		case 3, 6:
			if c != '/' {
				return 0, false, "", false
			}
		case 11:
			if c != '-' {
				return 0, false, "", false
			}
		case 14, 17:
			if c != ':' {
				return 0, false, "", false
			}
		default:
			if c < '0' || c > '9' {
				return 0, false, "", false
			}
		}
	}
	sev = line[23]
	if !strings.ContainsRune("IVWEF", rune(sev)) {
		return 0, false, "", false
	}
	text = line[25:]
	if strings.HasPrefix(text, " ") {
		text = text[1:]
	}
	if strings.HasPrefix(text, "[TRT] ") {
		trt, text = true, text[len("[TRT] "):]
	} else if text == "[TRT]" {
		trt, text = true, ""
	}
	return sev, trt, text, true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func (p *parser) line(raw string) {
	l := p.l
	l.Lines++
	if strings.HasPrefix(raw, "&&&& ") {
		p.result(raw)
		p.lastWarn = -1
		return
	}
	sev, _, text, ok := splitPrefix(raw)
	if !ok {
		p.unprefixed(raw)
		return
	}
	p.lastSev = sev
	switch sev {
	case 'W':
		p.warning(text)
		return
	case 'E', 'F':
		p.lastWarn = -1
		if len(l.Errors) < maxErrors {
			l.Errors = append(l.Errors, clip(text, maxEntryBytes))
		}
		return
	}
	p.lastWarn = -1
	p.info(text)
}

// result reads an "&&&& STATUS TensorRT.trtexec [TensorRT vNNNN] [bNN] # cmd" line.
func (p *parser) result(raw string) {
	l := p.l
	rest := raw[len("&&&& "):]
	word, _, _ := strings.Cut(rest, " ")
	switch word {
	case "RUNNING":
		l.Running = true
	case "PASSED", "FAILED", "WAIVED":
		l.Status = word
	default:
		return
	}
	if code, build, ok := parseBannerLine(raw); ok {
		if v, err := DecodeVersionCode(code); err == nil {
			v.Build = build
			if l.VersionCode == 0 || l.Version.Build == 0 {
				l.Version, l.VersionCode = v, code
			}
		}
	}
	if _, cmd, ok := strings.Cut(raw, " # "); ok && (l.Command == "" || word == "RUNNING") {
		l.Command = clip(cmd, maxEntryBytes)
	}
}

func (p *parser) unprefixed(raw string) {
	l := p.l
	// Continuation lines of a multi-line error (node dumps) belong to it.
	if (p.lastSev == 'E' || p.lastSev == 'F') && len(l.Errors) > 0 {
		last := &l.Errors[len(l.Errors)-1]
		if len(*last)+1+len(raw) <= maxEntryBytes {
			*last += "\n" + raw
		}
		return
	}
	if strings.TrimSpace(raw) == "" {
		return
	}
	l.Unprefixed = append(l.Unprefixed, clip(raw, maxEntryBytes))
	if len(l.Unprefixed) > maxUnprefixed {
		l.Unprefixed = append(l.Unprefixed[:0], l.Unprefixed[len(l.Unprefixed)-maxUnprefixed:]...)
	}
}

func (p *parser) warning(text string) {
	l := p.l
	// The second line of trtexec's two-line warnings is indented by two
	// spaces ("  If not already in use, …").
	if strings.HasPrefix(text, "  ") && p.lastWarn >= 0 && p.lastWarn < len(l.Warnings) {
		w := &l.Warnings[p.lastWarn]
		if w.Hint == "" {
			w.Hint = clip(strings.TrimSpace(text), maxEntryBytes)
			return
		}
	}
	if len(l.Warnings) >= maxWarnings {
		p.lastWarn = -1
		return
	}
	w := Warning{Text: clip(text, maxEntryBytes)}
	t := text
	switch {
	case strings.Contains(t, "GPU compute time is unstable"):
		w.Kind = WarnUnstable
		if i := strings.Index(t, "coefficient of variance = "); i >= 0 {
			if v, ok := leadingFloat(t[i+len("coefficient of variance = "):]); ok {
				w.Value = v
			}
		}
	case strings.Contains(t, "Throughput may be bound by Enqueue Time"):
		w.Kind = WarnEnqueueBound
	case strings.Contains(t, "Throughput may be bound by host-to-device"):
		w.Kind = WarnH2DBound
	case strings.Contains(t, "Throughput may be bound by device-to-host"):
		w.Kind = WarnD2HBound
	case strings.Contains(t, "Multiple inference streams are used"):
		w.Kind = WarnMultiStream
	case strings.Contains(t, "--useCudaGraph flag has been ignored"), strings.Contains(t, "not permitted under CUDA graph capture"):
		w.Kind = WarnCUDAGraph
	case strings.Contains(t, "Weakly-typed networks have been deprecated"):
		w.Kind = WarnWeakTyping
	case strings.Contains(t, "has been deprecated"):
		w.Kind = WarnDeprecatedFlag
	case strings.Contains(t, "Dynamic dimensions required for input"), strings.Contains(t, "Shape missing for input with dynamic shape"):
		w.Kind = WarnShapeOverride
	case strings.Contains(t, "could not be allocated"), strings.Contains(t, "insufficient memory"):
		w.Kind = WarnMemory
	case strings.Contains(t, "auxiliary streams"):
		w.Kind = WarnAuxStreams
	case strings.Contains(t, "Could not read cache from"), strings.Contains(t, "Could not read timing cache from"):
		w.Kind = WarnTimingCacheRead
	}
	l.Warnings = append(l.Warnings, w)
	p.lastWarn = len(l.Warnings) - 1
}

// info handles an [I] or [V] line.
func (p *parser) info(text string) {
	l := p.l
	trim := strings.TrimSpace(text)
	// Printed at INFO inside the device block, right before exit(1).
	if strings.HasPrefix(trim, "Cannot find any available devices") || strings.HasPrefix(trim, "Cannot find device ID") {
		if len(l.Fatal) < maxErrors {
			l.Fatal = append(l.Fatal, clip(trim, maxEntryBytes))
		}
		return
	}
	if strings.HasPrefix(trim, "=== ") && strings.HasSuffix(trim, " ===") && len(trim) >= 8 {
		p.header(trim[4 : len(trim)-4])
		return
	}
	switch p.sec {
	case secOptions:
		if trim == "" {
			p.sec = secNone
			return
		}
		if k, v, ok := strings.Cut(trim, ":"); ok && p.pairs < maxOptionPairs {
			if l.Options == nil {
				l.Options = map[string]map[string]string{}
			}
			m := l.Options[p.secName]
			if m == nil {
				m = map[string]string{}
				l.Options[p.secName] = m
			}
			m[strings.TrimSpace(k)] = clip(strings.TrimSpace(v), maxEntryBytes)
			p.pairs++
		}
		return
	case secDevice:
		if strings.HasPrefix(trim, "TensorRT version:") {
			p.sec = secNone
			break // handled below
		}
		p.device(text, trim)
		return
	case secSummary:
		if trim == "" {
			p.sec = secNone
			return
		}
		if p.summary(trim) {
			return
		}
	case secProfile:
		if trim == "" {
			p.sec = secNone
			return
		}
		p.profileRow(trim)
		return
	}
	p.milestone(trim)
}

func (p *parser) header(name string) {
	l := p.l
	p.secName = name
	switch {
	case strings.HasSuffix(name, " Options"):
		p.sec = secOptions
	case name == "Device Information":
		p.sec = secDevice
		if l.Device == nil {
			l.Device = &Device{}
		}
	case name == "Performance summary":
		p.sec = secSummary
		if l.Summary == nil {
			l.Summary = &Summary{}
		}
	case strings.HasPrefix(name, "Profile ("):
		p.sec = secProfile
		prof := &LayerProfile{}
		if n, ok := leadingInt(strings.TrimPrefix(name, "Profile (")); ok {
			prof.Iterations = n
		}
		l.Profile = prof
	default:
		p.sec = secOther
	}
}

// leadingFloat parses the number at the start of s (C++ default stream
// formatting: "5.1947", "1e-05", "inf", "nan").
func leadingFloat(s string) (float64, bool) {
	s = strings.TrimLeft(s, " ")
	n := 0
	// A printed double is at most ~25 characters; the bound keeps the
	// shrinking search below cheap on garbage.
	for n < len(s) && n < 40 && strings.IndexByte("+-0123456789.eEinfatyINFATY", s[n]) >= 0 {
		n++
	}
	for n > 0 {
		if v, err := strconv.ParseFloat(s[:n], 64); err == nil {
			// Non-finite figures are not kept: they would make the JSON
			// report unwritable and mean nothing as measurements.
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, false
			}
			return v, true
		}
		n--
	}
	return 0, false
}

func leadingInt64(s string) (int64, bool) {
	s = strings.TrimLeft(s, " ")
	n := 0
	for n < len(s) && (s[n] >= '0' && s[n] <= '9' || n == 0 && s[n] == '-') {
		n++
	}
	v, err := strconv.ParseInt(s[:n], 10, 64)
	return v, err == nil
}

func leadingInt(s string) (int, bool) {
	v, ok := leadingInt64(s)
	if !ok || v != int64(int(v)) {
		return 0, false
	}
	return int(v), true
}
