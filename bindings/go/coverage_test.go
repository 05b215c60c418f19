package dp_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestHeaderCoverage fails when dp.h declares a function that the package's
// non-test sources never call as C.<name>.
func TestHeaderCoverage(t *testing.T) {
	hdr, err := os.ReadFile(filepath.Join(repoRoot(t), "include", "dp", "dp.h"))
	must(t, err)
	// A declaration: DP_API, then the return type, then the name and "(";
	// it may span lines, so match across whitespace up to the first "(".
	decl := regexp.MustCompile(`DP_API\s[^;(]*?\b(dp_[a-z0-9_]+)\s*\(`)
	var names []string
	for _, m := range decl.FindAllSubmatch(hdr, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) < 100 {
		t.Fatalf("found only %d DP_API functions in dp.h; the parser is broken", len(names))
	}
	files, err := filepath.Glob("*.go")
	must(t, err)
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		must(t, err)
		src.Write(b)
	}
	called := map[string]bool{}
	for _, m := range regexp.MustCompile(`C\.(dp_[a-z0-9_]+)\b`).FindAllStringSubmatch(src.String(), -1) {
		called[m[1]] = true
	}
	missing := 0
	for _, n := range names {
		if !called[n] {
			t.Errorf("dp.h declares %s, which the binding does not wrap", n)
			missing++
		}
	}
	t.Logf("%d DP_API functions, %d wrapped", len(names), len(names)-missing)
}
