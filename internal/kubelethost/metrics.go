package kubelethost

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Kubelet metrics the package reads.
const (
	// RelistDurationMetric is the generic PLEG's relist duration histogram.
	RelistDurationMetric = "kubelet_pleg_relist_duration_seconds"
	// RelistIntervalMetric is the histogram of the time between relists.
	RelistIntervalMetric = "kubelet_pleg_relist_interval_seconds"
	// PodStartSLIMetric is the pod start SLI histogram: from the pod's
	// creation to all its containers reported started, without image pulls
	// and init containers. The kubelet records it only for pods it observes
	// through an API server watch, so a standalone kubelet never exports
	// it; PodStartMetric is what it has.
	PodStartSLIMetric = "kubelet_pod_start_sli_duration_seconds"
	// PodStartMetric is the histogram of the time from the kubelet first
	// seeing a pod to the pod running.
	PodStartMetric = "kubelet_pod_start_duration_seconds"
	// PLEGLastSeenMetric is the gauge holding the Unix time of the PLEG's
	// last successful relist, as of the last time the kubelet checked its
	// PLEG's health (its sync loop and node status do, every few seconds):
	// while those are blocked it is not updated, so its age is the time
	// since a health check saw a relist, not since the PLEG relisted
	// (RelistIntervalMetric). The kubelet calls the PLEG unhealthy when
	// the relist is older than 3 minutes.
	PLEGLastSeenMetric = "kubelet_pleg_last_seen_seconds"
)

// Value returns the sum of the samples of the series name (a gauge or
// counter, over all its label sets) and whether there was any.
func Value(samples []Sample, name string) (float64, bool) {
	var sum float64
	found := false
	for _, s := range samples {
		if s.Name == name {
			sum += s.Value
			found = true
		}
	}
	return sum, found
}

// Sample is one sample of a metrics page: a series name, its labels and a
// value.
type Sample struct {
	// Name is the series name, with a histogram's _bucket, _sum or _count
	// suffix.
	Name string
	// Labels are the sample's labels, le included.
	Labels map[string]string
	// Value is the sample's value.
	Value float64
}

// ParseText parses the Prometheus text exposition format: one sample per
// line, comments and blank lines ignored, an optional timestamp dropped.
func ParseText(text string) ([]Sample, error) {
	var out []Sample
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("kubelethost: metrics line %d: %w: %q", i+1, err, line)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (Sample, error) {
	end := strings.IndexAny(line, "{ \t")
	if end <= 0 {
		return Sample{}, fmt.Errorf("no value")
	}
	s := Sample{Name: line[:end], Labels: map[string]string{}}
	rest := line[end:]
	if rest[0] == '{' {
		var err error
		if rest, err = parseLabels(rest[1:], s.Labels); err != nil {
			return Sample{}, err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return Sample{}, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return Sample{}, err
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into into and returns what follows
// the closing brace.
func parseLabels(s string, into map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return "", fmt.Errorf("unterminated labels")
		}
		if s[0] == '}' {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", fmt.Errorf("bad label")
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		if s == "" || s[0] != '"' {
			return "", fmt.Errorf("bad label")
		}
		var val strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", fmt.Errorf("unterminated label value")
		}
		into[name] = val.String()
		s = s[i+1:]
	}
}

// Bucket is one cumulative histogram bucket: Count observations were at
// most UpperBound.
type Bucket struct {
	// UpperBound is the bucket's le; +Inf for the last.
	UpperBound float64
	// Count is how many observations fell at or below UpperBound.
	Count uint64
}

// Histogram is one histogram series: its labels (without le), the sum and
// count of its observations and its cumulative buckets, by upper bound.
type Histogram struct {
	// Name is the histogram's name, without suffix.
	Name string
	// Labels are the series' labels, le excluded.
	Labels map[string]string
	// Sum is the sum of all observations.
	Sum float64
	// Count is the number of observations.
	Count uint64
	// Buckets are cumulative, in increasing UpperBound.
	Buckets []Bucket
}

// Histograms collects the series of the histogram name from samples, one
// per label set, ordered by their labels.
func Histograms(samples []Sample, name string) []Histogram {
	byKey := map[string]*Histogram{}
	var keys []string
	for _, s := range samples {
		suffix, ok := strings.CutPrefix(s.Name, name)
		if !ok || (suffix != "_bucket" && suffix != "_sum" && suffix != "_count") {
			continue
		}
		labels := make(map[string]string, len(s.Labels))
		for k, v := range s.Labels {
			if k != "le" {
				labels[k] = v
			}
		}
		key := labelKey(labels)
		h := byKey[key]
		if h == nil {
			h = &Histogram{Name: name, Labels: labels}
			byKey[key] = h
			keys = append(keys, key)
		}
		switch suffix {
		case "_sum":
			h.Sum = s.Value
		case "_count":
			h.Count = toCount(s.Value)
		case "_bucket":
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue
			}
			h.Buckets = append(h.Buckets, Bucket{UpperBound: le, Count: toCount(s.Value)})
		}
	}
	sort.Strings(keys)
	out := make([]Histogram, 0, len(keys))
	for _, k := range keys {
		h := byKey[k]
		sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].UpperBound < h.Buckets[j].UpperBound })
		out = append(out, *h)
	}
	return out
}

func toCount(v float64) uint64 {
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return uint64(math.Round(v))
}

func labelKey(labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for k := range labels {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s=%q,", k, labels[k])
	}
	return b.String()
}

// Merge adds histograms of one name with the same bucket bounds (the
// series of several label sets) into one without labels. Merging nothing
// gives a zero Histogram; different bounds are an error.
func Merge(hs ...Histogram) (Histogram, error) {
	var out Histogram
	for i, h := range hs {
		if i == 0 {
			out = Histogram{Name: h.Name, Labels: map[string]string{}, Buckets: append([]Bucket(nil), h.Buckets...)}
		} else {
			if len(h.Buckets) != len(out.Buckets) {
				return Histogram{}, fmt.Errorf("kubelethost: merge %s: %d buckets and %d", h.Name, len(out.Buckets), len(h.Buckets))
			}
			for j, b := range h.Buckets {
				if b.UpperBound != out.Buckets[j].UpperBound {
					return Histogram{}, fmt.Errorf("kubelethost: merge %s: bucket %d bounds %v and %v", h.Name, j, out.Buckets[j].UpperBound, b.UpperBound)
				}
				out.Buckets[j].Count += b.Count
			}
		}
		out.Sum += h.Sum
		out.Count += h.Count
	}
	return out, nil
}

// Sub returns the observations h holds beyond an earlier scrape of the same
// series: what happened between the two. Buckets of earlier that h lacks
// are ignored; a count that went down (a restarted kubelet) gives 0.
func (h Histogram) Sub(earlier Histogram) Histogram {
	sub := func(a, b uint64) uint64 {
		if b > a {
			return 0
		}
		return a - b
	}
	old := map[float64]uint64{}
	for _, b := range earlier.Buckets {
		old[b.UpperBound] = b.Count
	}
	out := Histogram{Name: h.Name, Labels: h.Labels, Sum: h.Sum - earlier.Sum, Count: sub(h.Count, earlier.Count)}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, Bucket{UpperBound: b.UpperBound, Count: sub(b.Count, old[b.UpperBound])})
	}
	return out
}

// Mean is Sum/Count, or 0 without observations.
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// Quantile estimates the q-quantile (0 <= q <= 1) by linear interpolation
// inside the bucket that holds it, as Prometheus' histogram_quantile does:
// the answer is only as fine as the buckets. It is NaN without
// observations; a quantile in the +Inf bucket is the largest finite bound.
func (h Histogram) Quantile(q float64) float64 {
	if len(h.Buckets) == 0 || q < 0 || q > 1 {
		return math.NaN()
	}
	total := h.Buckets[len(h.Buckets)-1].Count
	if total == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range h.Buckets {
		if float64(b.Count) >= rank {
			if math.IsInf(b.UpperBound, 1) {
				return lower
			}
			in := b.Count - below
			if in == 0 {
				return b.UpperBound
			}
			return lower + (b.UpperBound-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = b.UpperBound, b.Count
	}
	return lower
}

// String is a one-line summary: count, mean and quantiles.
func (h Histogram) String() string {
	return fmt.Sprintf("%s: n=%d mean=%.4fs p50=%.4fs p90=%.4fs p99=%.4fs",
		h.Name, h.Count, h.Mean(), h.Quantile(0.5), h.Quantile(0.9), h.Quantile(0.99))
}

// Histogram scrapes the kubelet's /metrics and returns the histogram name
// summed over all its label sets (Merge); a histogram the kubelet has not
// exported yet is a zero Histogram with that name.
func (k *Kubelet) Histogram(ctx context.Context, name string) (Histogram, error) {
	if name == "" {
		return Histogram{}, &ArgError{Method: "Histogram", Arg: "name", Reason: "must not be empty"}
	}
	text, err := k.Metrics(ctx)
	if err != nil {
		return Histogram{}, err
	}
	samples, err := ParseText(text)
	if err != nil {
		return Histogram{}, err
	}
	hs := Histograms(samples, name)
	if len(hs) == 0 {
		return Histogram{Name: name, Labels: map[string]string{}}, nil
	}
	return Merge(hs...)
}
