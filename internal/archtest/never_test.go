package archtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestNeverReached checks the never block of docs/ARCHITECTURE.md: no package on
// the left of a "!<" reaches one on its right by any chain of its code's imports,
// and the deps block does not allow it either (so that an edit of the table cannot
// quietly open a path the design forbids).
func TestNeverReached(t *testing.T) {
	rules, err := parseNever(docBlock(t, "never"))
	if err != nil {
		t.Fatalf("%s, never block: %v", architectureDoc, err)
	}
	allowed, err := parseRules(docBlock(t, "deps"))
	if err != nil {
		t.Fatalf("%s, deps block: %v", architectureDoc, err)
	}
	imports := map[string][]string{}
	for _, p := range modulePackages(t) {
		name := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, modulePath), "/")
		for _, imp := range p.Imports {
			if dep, local := strings.CutPrefix(imp, modulePath+"/"); local {
				imports[name] = append(imports[name], dep)
			} else if !isStandard(imp) {
				imports[name] = append(imports[name], imp)
			}
		}
		if _, ok := imports[name]; !ok {
			imports[name] = nil
		}
	}
	for _, r := range rules {
		for _, low := range r.from {
			if _, ok := imports[low]; !ok {
				t.Errorf("never block names %s, which is no package of the module", low)
				continue
			}
			chains := reach(imports, low)
			for _, high := range r.to {
				if chain, ok := chains[high]; ok {
					t.Errorf("%s reaches %s (%s): the never block forbids it", low, high, strings.Join(chain, " -> "))
				}
				if allowed[low][high] {
					t.Errorf("the deps block lets %s import %s: the never block forbids it", low, high)
				}
			}
		}
	}
}

type neverRule struct{ from, to []string }

// parseNever reads "a, b !< c, d;" statements, with # comments.
func parseNever(text string) ([]neverRule, error) {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		lines = append(lines, line)
	}
	var rules []neverRule
	for _, stmt := range strings.Split(strings.Join(lines, " "), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		left, right, ok := strings.Cut(stmt, "!<")
		if !ok || strings.Contains(right, "<") {
			return nil, fmt.Errorf("want one \"!<\" in %q", strings.TrimSpace(stmt))
		}
		r := neverRule{from: names(left), to: names(right)}
		if len(r.from) == 0 || len(r.to) == 0 {
			return nil, fmt.Errorf("empty side in %q", strings.TrimSpace(stmt))
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func names(list string) []string {
	var out []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// reach returns every name from reaches through imports, each with one chain of
// imports that leads there (breadth first, so the chain is a shortest one).
func reach(imports map[string][]string, from string) map[string][]string {
	chains := map[string][]string{}
	queue := []string{from}
	chains[from] = []string{from}
	for len(queue) > 0 {
		at := queue[0]
		queue = queue[1:]
		for _, next := range imports[at] {
			if _, seen := chains[next]; seen {
				continue
			}
			chains[next] = append(slices.Clone(chains[at]), next)
			queue = append(queue, next)
		}
	}
	delete(chains, from)
	return chains
}

func TestParseNever(t *testing.T) {
	rules, err := parseNever("a, b !< c; # x\n d !< e, f;")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || !slices.Equal(rules[0].from, []string{"a", "b"}) || !slices.Equal(rules[1].to, []string{"e", "f"}) {
		t.Fatalf("parsed %+v", rules)
	}
	for _, bad := range []string{"a < b", "a !<", "!< b", "a !< b < c"} {
		if _, err := parseNever(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	chains := reach(map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a")
	if !slices.Equal(chains["c"], []string{"a", "b", "c"}) || len(chains) != 2 {
		t.Fatalf("reach: %v", chains)
	}
}
