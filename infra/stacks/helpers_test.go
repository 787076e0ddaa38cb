package stacks

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// repoRoot returns the repo root and fails the test, saying what is missing,
// if the build assets the stack packages are absent.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAssets(root); err != nil {
		t.Fatalf("cannot synthesize: %v", err)
	}
	return root
}

// cdkContext is the "context" object of the repo's cdk.json (what the CLI
// hands the app; `go test` does not read cdk.json by itself).
func cdkContext(t *testing.T, root string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	if len(doc.Context) == 0 {
		t.Fatal("cdk.json has no context (feature flags)")
	}
	return doc.Context
}

// synthesized is one stack's template, both as the assertions helper and
// as plain JSON for walking.
type synthesized struct {
	W        *Wsfleet
	Cfg      EnvConfig
	Template assertions.Template
	JSON     map[string]any
}

var (
	synthMu    sync.Mutex
	synthCache = map[string]*synthesized{}
)

// synth synthesizes the stack for the given context overrides on top of
// cdk.json's context, once per distinct override set.
func synth(t *testing.T, overrides map[string]any) *synthesized {
	t.Helper()
	key := fmt.Sprint(overrides) // fmt sorts map keys
	synthMu.Lock()
	defer synthMu.Unlock()
	if s, ok := synthCache[key]; ok {
		return s
	}
	root := repoRoot(t)
	ctx := cdkContext(t, root)
	maps.Copy(ctx, overrides)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
	w, err := NewFromContext(app, root)
	if err != nil {
		t.Fatalf("NewFromContext(%v): %v", overrides, err)
	}
	opts, err := OptionsFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := assertions.Template_FromStack(w.Stack, nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	s := &synthesized{W: w, Cfg: cfg, Template: tmpl, JSON: doc}
	synthCache[key] = s
	return s
}

func env(name string) map[string]any { return map[string]any{CtxEnv: name} }

// noPanic runs an assertions call (which panics on mismatch) and turns the
// panic into a test failure.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// panics reports whether f panicked (a failed assertion).
func panics(f func()) (msg string, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			msg, ok = fmt.Sprint(r), true
		}
	}()
	f()
	return "", false
}

// resources returns the template's resources of type typ, by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.JSON["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// only returns the single resource of type typ.
func (s *synthesized) only(t *testing.T, typ string) (string, map[string]any) {
	t.Helper()
	rs := s.resources(typ)
	if len(rs) != 1 {
		t.Fatalf("want exactly one %s, have %d", typ, len(rs))
	}
	for id, r := range rs {
		return id, r
	}
	panic("unreachable")
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// logicalID returns the template logical id of a construct's default child.
func (s *synthesized) logicalID(c awscdk.Resource) string {
	cfn := c.Node().DefaultChild().(awscdk.CfnElement)
	return *s.W.Stack.GetLogicalId(cfn)
}

// asJSON renders v compactly for comparisons and messages.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
