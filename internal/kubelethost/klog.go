package kubelethost

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"strings"
)

// LogEntry is one entry of a klog text log: a header line and the lines
// that continue it.
type LogEntry struct {
	// Severity is 'I', 'W', 'E' or 'F'.
	Severity byte
	// Source is file:line of the code that logged it.
	Source string
	// Message is the structured log message (the first quoted string), or
	// the text after the header for unstructured entries.
	Message string
	// Err is the value of the entry's err="..." field, if any.
	Err string
	// Raw is the entry as logged, continuation lines included.
	Raw string
}

// klogHeader matches "E1203 10:15:00.123456   12345 file.go:123] rest".
var klogHeader = regexp.MustCompile(`^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ ([^ \]]+)\] (.*)$`)

// ParseLog splits a klog text log into entries. Lines before the first
// header (output of the wrapper, say) are dropped.
func ParseLog(r io.Reader) ([]LogEntry, error) {
	var out []LogEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		m := klogHeader.FindStringSubmatch(line)
		if m == nil {
			if len(out) > 0 {
				out[len(out)-1].Raw += "\n" + line
			}
			continue
		}
		e := LogEntry{Severity: m[1][0], Source: m[2], Raw: line}
		e.Message, e.Err = splitStructured(m[3])
		out = append(out, e)
	}
	return out, sc.Err()
}

// splitStructured takes `"msg" k="v" err="boom"` apart; an unstructured
// rest is all message.
func splitStructured(rest string) (msg, errVal string) {
	if !strings.HasPrefix(rest, `"`) {
		return rest, ""
	}
	msg, after, ok := readQuoted(rest)
	if !ok {
		return rest, ""
	}
	for after != "" {
		after = strings.TrimLeft(after, " ")
		eq := strings.IndexByte(after, '=')
		if eq <= 0 {
			break
		}
		key := after[:eq]
		after = after[eq+1:]
		var val string
		if strings.HasPrefix(after, `"`) {
			if val, after, ok = readQuoted(after); !ok {
				break
			}
		} else {
			val, after, _ = strings.Cut(after, " ")
		}
		if key == "err" {
			errVal = val
		}
	}
	return msg, errVal
}

// readQuoted reads a Go-quoted string at the start of s, returning it
// unquoted and what follows.
func readQuoted(s string) (string, string, bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				default:
					b.WriteByte(s[i])
				}
			}
		case '"':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", s, false
}

// IsCRIError reports whether e is an error the kubelet logged about a call
// to its runtime: severity E (or F) and a gRPC status in it
// ("rpc error: code = ...").
func (e LogEntry) IsCRIError() bool {
	return (e.Severity == 'E' || e.Severity == 'F') && strings.Contains(e.Raw, "rpc error: code = ")
}

// Code is the gRPC code name of a CRI error ("NotFound", "Unknown", ...),
// or "" when the entry holds none.
func (e LogEntry) Code() string {
	_, after, ok := strings.Cut(e.Raw, "rpc error: code = ")
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(after, " ")
	return code
}

// CRIErrors returns the entries of entries for which IsCRIError holds.
func CRIErrors(entries []LogEntry) []LogEntry {
	var out []LogEntry
	for _, e := range entries {
		if e.IsCRIError() {
			out = append(out, e)
		}
	}
	return out
}

// Log parses the kubelet's log so far. It can be read after the kubelet
// exited, until Close removes it.
func (k *Kubelet) Log() ([]LogEntry, error) {
	if k == nil || k.cmd == nil {
		return nil, errZero
	}
	f, err := os.Open(k.LogPath)
	if err != nil {
		if k.isClosed() {
			return nil, ErrClosed
		}
		return nil, err
	}
	defer f.Close()
	return ParseLog(f)
}

// CRIErrors returns the CRI errors in the kubelet's log so far (see
// LogEntry.IsCRIError).
func (k *Kubelet) CRIErrors() ([]LogEntry, error) {
	entries, err := k.Log()
	if err != nil {
		return nil, err
	}
	return CRIErrors(entries), nil
}

// PLEGUnhealthy returns the entries in which the kubelet reports its PLEG
// unhealthy ("PLEG is not healthy"), leaving out the ones that only say it
// has not relisted yet, which every kubelet logs while it starts.
func PLEGUnhealthy(entries []LogEntry) []LogEntry {
	var out []LogEntry
	for _, e := range entries {
		if strings.Contains(e.Raw, "PLEG is not healthy") && !strings.Contains(e.Raw, "pleg has yet to be successful") {
			out = append(out, e)
		}
	}
	return out
}
