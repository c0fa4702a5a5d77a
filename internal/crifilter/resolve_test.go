package crifilter

import (
	"maps"
	"slices"
	"testing"
)

func TestResolveID(t *testing.T) {
	tests := []struct {
		name   string
		id     string
		ids    []string
		want   string
		wantOK bool
	}{
		{"empty id is no filter", "", []string{"abc"}, "", true},
		{"empty id among no ids", "", nil, "", true},
		{"exact", "abc", []string{"abd", "abc"}, "abc", true},
		{"exact that is also a prefix of another", "ab", []string{"abc", "ab", "abd"}, "ab", true},
		{"exact after an ambiguity", "ab", []string{"abc", "abd", "ab"}, "ab", true},
		{"unique prefix", "ab", []string{"abc", "xyz"}, "abc", true},
		{"unique prefix repeated", "ab", []string{"abc", "xyz", "abc"}, "abc", true},
		{"ambiguous prefix", "ab", []string{"abc", "abd"}, "", false},
		{"ambiguous prefix with a repeat", "ab", []string{"abc", "abd", "abc"}, "", false},
		{"unknown", "q", []string{"abc", "abd"}, "", false},
		{"no ids", "abc", nil, "", false},
		{"longer than every id", "abcd", []string{"abc"}, "", false},
		{"prefix is case sensitive", "AB", []string{"abc"}, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ResolveID(tc.id, slices.Values(tc.ids))
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ResolveID(%q, %q) = %q, %v; want %q, %v", tc.id, tc.ids, got, ok, tc.want, tc.wantOK)
			}
			byID := make(map[string]int, len(tc.ids))
			for i, id := range tc.ids {
				byID[id] = i
			}
			got, ok = ResolveKey(tc.id, byID)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("ResolveKey(%q, %q) = %q, %v; want %q, %v", tc.id, slices.Sorted(maps.Keys(byID)), got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestResolveIDEmptyIDReadsNothing(t *testing.T) {
	read := false
	ids := func(yield func(string) bool) { read = true }
	if got, ok := ResolveID("", ids); got != "" || !ok {
		t.Fatalf(`ResolveID("") = %q, %v; want "", true`, got, ok)
	}
	if read {
		t.Fatal(`ResolveID("") read the ids`)
	}
}

func TestResolveIDStopsOnExactMatch(t *testing.T) {
	var read []string
	ids := func(yield func(string) bool) {
		for _, id := range []string{"abc", "ab", "abd"} {
			read = append(read, id)
			if !yield(id) {
				return
			}
		}
	}
	if got, ok := ResolveID("ab", ids); got != "ab" || !ok {
		t.Fatalf(`ResolveID("ab") = %q, %v; want "ab", true`, got, ok)
	}
	if want := []string{"abc", "ab"}; !slices.Equal(read, want) {
		t.Fatalf("read %q, want %q", read, want)
	}
}

type item struct{ id string }

func (i item) GetId() string { return i.id }

func TestIDs(t *testing.T) {
	items := []item{{"a"}, {"b"}, {"c"}}
	if got, want := slices.Collect(IDs(items)), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("IDs = %q, want %q", got, want)
	}
	var first []string
	for id := range IDs(items) {
		first = append(first, id)
		break
	}
	if want := []string{"a"}; !slices.Equal(first, want) {
		t.Fatalf("IDs after break = %q, want %q", first, want)
	}
	if got := slices.Collect(IDs[item](nil)); len(got) != 0 {
		t.Fatalf("IDs(nil) = %q, want none", got)
	}
}
