package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// controlPlane are the packages of the worker's control plane: the
// ownership core and its stores, the work queue, the rebalancing plan, the
// worker itself and its claim loops. Each reads time from the worker's
// injected clock.Clock or bounds a call with a context (shared/clock's
// package doc says why, and how a fleet simulator runs them in a
// testing/synctest bubble). Not here: shared/lease/leasetest (the
// conformance suite, test support run against real engines in real time)
// the data plane (workers/streamer/internal/session, sink/...), which
// reads the system clock: virtual in a bubble, and a session's own time
// (not the lease clock's; the control loop's ticks are the base clock's);
// and table creation (shared/sessionitem's wait for ACTIVE), set-up.
var controlPlane = []string{
	mod + "shared/lease",
	mod + "shared/lease/memstore",
	mod + "shared/lease/dynamostore",
	mod + "shared/notify",
	mod + "shared/notify/sqsnotify",
	mod + "shared/rebalance",
	mod + "workers/streamer",
	mod + "workers/streamer/internal/claim",
	// What the control plane computes with: the metrics registry (its
	// flush takes now) and the back-off policy.
	mod + "shared/metrics",
	mod + "workers/streamer/internal/backoff",
}

// wallClock are the functions of package time that read or wait on the
// system clock.
var wallClock = []string{"Now", "Since", "Until", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Sleep"}

// wallClockAllowed are the control plane's uses of the system clock, each
// "import path/file.go function time.Func" with why it may not take the
// worker's clock. Keep it short: an entry no longer used fails the test.
var wallClockAllowed = map[string]string{
	// The DynamoDB adapter's back-off before it asks again for a
	// BatchGetItem's unprocessed keys: it paces real network calls, in real
	// time (a simulator runs on memstore; in a synctest bubble it would be
	// virtual anyway), and the store has no clock of its own.
	mod + "shared/lease/dynamostore/liveness.go (*Store).GetWorkers time.After": "back-off between real BatchGetItem calls",
}

// TestControlPlaneReadsNoWallClock fails when a control-plane package
// calls the system clock (time.Now, Sleep, NewTimer, …) instead of the
// worker's clock.Clock, outside wallClockAllowed. Tests are not checked.
func TestControlPlaneReadsNoWallClock(t *testing.T) {
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}} {{join .IgnoredGoFiles \" \"}}"}, controlPlane...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list (run in the repository, with its go.work): %v\n%s", err, out)
	}
	seen := map[string]bool{}
	files := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.SplitN(strings.TrimSpace(line), "\t", 3)
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		for name := range strings.FieldsSeq(f[2]) {
			files++
			src, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			uses, err := wallClockUses(name, src)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range uses {
				key := f[0] + "/" + name + " " + u.fn + " time." + u.name
				if _, ok := wallClockAllowed[key]; ok {
					seen[key] = true
					continue
				}
				t.Errorf("%s:%d: %s reads the system clock (time.%s): use the worker's clock.Clock (shared/clock), or add %q to wallClockAllowed with the reason", filepath.Join(f[1], name), u.line, u.fn, u.name, key)
			}
		}
	}
	if files == 0 {
		t.Fatal("no file read")
	}
	for key := range wallClockAllowed {
		if !seen[key] {
			t.Errorf("wallClockAllowed entry %q matches no use: remove it", key)
		}
	}
}

type wallClockUse struct {
	fn, name string // the enclosing function ("(*T).M", "F", "init" for package level) and time's function
	line     int
}

// wallClockUses lists src's references to the wall-clock functions of
// package time (calls and function values alike, whatever name the import
// has; a dot import is an error).
func wallClockUses(name string, src []byte) ([]wallClockUse, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p != "time" {
			continue
		}
		local = "time"
		if im.Name != nil {
			local = im.Name.Name
		}
		if local == "." {
			return nil, fmt.Errorf("%s: dot import of time (its clock functions cannot be checked)", name)
		}
	}
	if local == "" || local == "_" {
		return nil, nil
	}
	var uses []wallClockUse
	for _, d := range f.Decls {
		fn := "init"
		if fd, ok := d.(*ast.FuncDecl); ok {
			fn = funcName(fd)
		}
		ast.Inspect(d, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && slices.Contains(wallClock, sel.Sel.Name) {
				uses = append(uses, wallClockUse{fn: fn, name: sel.Sel.Name, line: fset.Position(sel.Pos()).Line})
			}
			return true
		})
	}
	return uses, nil
}

// funcName is "F" or "(T).M" / "(*T).M".
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	recv := fd.Recv.List[0].Type
	star := ""
	if s, ok := recv.(*ast.StarExpr); ok {
		star, recv = "*", s.X
	}
	switch r := recv.(type) {
	case *ast.IndexExpr:
		recv = r.X
	case *ast.IndexListExpr:
		recv = r.X
	}
	id, _ := recv.(*ast.Ident)
	if id == nil {
		return fd.Name.Name
	}
	return "(" + star + id.Name + ")." + fd.Name.Name
}

// The scanner finds calls, function values and a renamed import, and
// leaves alone what is not package time's clock.
func TestWallClockUsesFindsEveryForm(t *testing.T) {
	src := `package p

import (
	"context"
	tm "time"
)

var start = tm.Now()

type T struct{}

func (*T) wait(ctx context.Context) {
	<-tm.After(tm.Second)
	f := tm.Since
	_ = f
	_, _ = context.WithTimeout(ctx, tm.Second) // a context deadline: allowed
	var time struct{ Now func() }
	_ = time.Now // not package time
}

func sleep() { tm.Sleep(tm.Duration(1)) }
`
	uses, err := wallClockUses("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range uses {
		got = append(got, fmt.Sprintf("%d %s %s", u.line, u.fn, u.name))
	}
	want := []string{"8 init Now", "13 (*T).wait After", "14 (*T).wait Since", "21 sleep Sleep"}
	if !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
	if _, err := wallClockUses("d.go", []byte("package p\nimport . \"time\"\nvar x = Now()\n")); err == nil {
		t.Fatal("a dot import of time passed")
	}
}
