package streamer

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/testkit/stacks"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// workerGoroutines are the stacks of the goroutines running the worker's
// own code (this package, its batcher, its claim loops, its sessions),
// besides the calling test's.
func workerGoroutines() []string {
	var out []string
	for _, g := range stacks.All() {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "testing.(*T).Run") {
			continue
		}
		for _, pkg := range []string{"wsfleet/workers/streamer.", "workers/streamer/sink/batch.", "workers/streamer/internal/claim.", "workers/streamer/internal/session.",
			"workers/streamer/internal/waitfor."} {
			if strings.Contains(g, pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// Issue 23: Run returns only after every goroutine the worker started has
// ended: the batcher it owns, the admin server, mailbox re-reads, a
// /handoff claim, the claim loops and the sessions.
func TestRunLeavesNoGoroutineBehind(t *testing.T) {
	if left := workerGoroutines(); len(left) > 0 { // earlier tests' workers have all returned
		t.Logf("%d worker goroutines before the test (ignored by name below)", len(left))
	}
	before := map[string]bool{}
	for _, g := range workerGoroutines() {
		before[strings.SplitN(g, "\n", 2)[0]] = true
	}
	dest := &brownoutDest{written: map[string]map[int64]bool{}}
	bc := batch.DefaultConfig()
	bc.RequestTimeout = testConfig("x").SafetyMargin / 2
	b, err := batch.New(dest, bc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	m := startMem(t, 3, nil, b)
	testwait.Eventually(t, 10*time.Second, "3 sessions streaming into the batcher", func() bool {
		return dest.count("mem-000000") >= 5 && dest.count("mem-000001") >= 5 && dest.count("mem-000002") >= 5
	})
	observer{m.Worker}.Mailbox([]string{"mem-000001"}) // a mailbox re-read
	resp := adminDo(t, http.MethodPost, fmt.Sprintf("http://%s/handoff?connection_id=unknown-session", m.AdminAddr()))
	resp.Body.Close() // its claim runs in the background
	m.cancel()
	err = <-m.done
	m.done <- err // for the cleanup
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkPhases(t, m.Worker, map[string]int64{"claim": 3, "handoff": 1, "sessions": 3, "background": 4, "admin": 1, "sink": 1, "tasks": 2})
	// A goroutine that signalled its end (a phase group's Done, run by its
	// defer) may still be returning from its last frame when Run
	// returns: wait a moment for such exits, never for running code (an
	// orphan stays, and fails the check at the deadline).
	var left []string
	deadline := time.Now().Add(2 * time.Second)
	for {
		left = left[:0]
		for _, g := range workerGoroutines() {
			if !before[strings.SplitN(g, "\n", 2)[0]] {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("%d goroutines of the worker still running after Run returned:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// checkPhases checks the shutdown's debug view after Run returned: every
// phase ended, in shutdownOrder, with none of its goroutines running, each
// having started at least as many goroutines as least names for it.
func checkPhases(t *testing.T, w *Worker, least map[string]int64) {
	t.Helper()
	got := w.phasesEnded()
	var names []string
	for _, p := range got {
		names = append(names, p.name)
		if p.running != 0 {
			t.Errorf("phase %s: %d goroutines still running after Run returned", p.name, p.running)
		}
		if p.started < least[p.name] {
			t.Errorf("phase %s started %d goroutines, want at least %d", p.name, p.started, least[p.name])
		}
	}
	if !slices.Equal(names, shutdownOrder) {
		t.Errorf("phases ended in the order %v, want %v", names, shutdownOrder)
	}
}

// A worker cancelled before it registered ends the phases it began: the
// admin server's, the sink's and the tasks', in that order.
func TestRunCancelledBeforeRegisterEndsItsPhases(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := testConfig("phases-early")
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: memstore.New(), Handler: &recSink{by: map[string][]delivery{}}, Logger: &log, Metrics: &syncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var names []string
	for _, p := range w.phasesEnded() {
		names = append(names, p.name)
		if p.running != 0 {
			t.Errorf("phase %s: %d goroutines still running after Run returned", p.name, p.running)
		}
	}
	if want := []string{"admin", "sink", "tasks"}; !slices.Equal(names, want) {
		t.Errorf("phases ended in the order %v, want %v", names, want)
	}
}

// Every goroutine the package's shipped code starts goes through a phase's
// group (routines.go): no go statement elsewhere, and a sync.WaitGroup or
// errgroup.Group only as a fan-out, a local variable of one function that
// waits for it there (its goroutines belong to the phase of the goroutine
// that joins them).
func TestShippedCodeStartsGoroutinesInPhases(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "routines.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		isGroup := func(e ast.Expr) bool {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok {
				return false
			}
			pkg, ok := sel.X.(*ast.Ident)
			return ok && (pkg.Name == "sync" && sel.Sel.Name == "WaitGroup" || pkg.Name == "errgroup" && sel.Sel.Name == "Group")
		}
		// A group type anywhere but a local var of a function that waits
		// for it: a field, a parameter, a package variable.
		locals := map[*ast.ValueSpec]*ast.FuncDecl{}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok && vs.Type != nil && isGroup(vs.Type) {
					locals[vs] = fn
				}
				return true
			})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a go statement: start it in a phase's group (routines.go)", fset.Position(n.Pos()))
			case *ast.ValueSpec:
				if n.Type == nil || !isGroup(n.Type) {
					return true
				}
				fn := locals[n]
				if fn == nil {
					t.Errorf("%s: a package-level %s: start the goroutines in a phase's group (routines.go)", fset.Position(n.Pos()), typeName(n.Type))
					return true
				}
				for _, id := range n.Names {
					if !waitsFor(fn.Body, id.Name) {
						t.Errorf("%s: %s's %s %s is not waited for there: a fan-out is joined by the function that starts it", fset.Position(n.Pos()), fn.Name.Name, typeName(n.Type), id.Name)
					}
				}
			case *ast.CompositeLit:
				if n.Type != nil && isGroup(n.Type) {
					t.Errorf("%s: a %s literal: declare a fan-out as a var its function waits for", fset.Position(n.Pos()), typeName(n.Type))
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 && isGroup(n.Args[0]) {
					t.Errorf("%s: new(%s): declare a fan-out as a var its function waits for", fset.Position(n.Pos()), typeName(n.Args[0]))
				}
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "WithContext" {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "errgroup" {
						t.Errorf("%s: errgroup.WithContext: declare a fan-out as a var its function waits for", fset.Position(n.Pos()))
					}
				}
			case *ast.Field:
				if isGroup(n.Type) || isGroup(deref(n.Type)) {
					t.Errorf("%s: a field or parameter of type %s: start the goroutines in a phase's group (routines.go)", fset.Position(n.Pos()), typeName(n.Type))
				}
			}
			return true
		})
	}
}

func deref(e ast.Expr) ast.Expr {
	if s, ok := e.(*ast.StarExpr); ok {
		return s.X
	}
	return e
}

func typeName(e ast.Expr) string {
	sel := deref(e).(*ast.SelectorExpr)
	return sel.X.(*ast.Ident).Name + "." + sel.Sel.Name
}

// waitsFor reports whether body calls name.Wait().
func waitsFor(body *ast.BlockStmt, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Wait" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
