package stacks

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
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
	// Nag are the stack's unsuppressed cdk-nag findings (nagFindings);
	// StdoutSinkWarnings its wsfleet:stdout-sink warnings (read with them,
	// while the synthesis's Outdir exists).
	Nag                []string
	StdoutSinkWarnings int
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
	outdir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(outdir)})
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
	// An error annotation (an unsuppressed cdk-nag error among them) fails
	// the synthesis itself: name what failed rather than panic.
	var tmpl assertions.Template
	if msg, failed := panics(func() { tmpl = assertions.Template_FromStack(w.Stack, nil) }); failed {
		t.Fatalf("synthesis of %v failed: %s%s", overrides, msg, validationReport(outdir))
	}
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// The annotations are read now, while Outdir exists: reading them
	// synthesizes again, and cdk-nag writes its report there.
	s := &synthesized{W: w, Cfg: cfg, Template: tmpl, JSON: doc, Nag: nagFindings(w.Stack), StdoutSinkWarnings: stdoutWarnings(t, w.Stack)}
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

// logicalID returns the template logical id of a construct's default child:
// its resolved LogicalId, which honours OverrideLogicalId (the stack's
// GetLogicalId is the id CDK would allocate, whatever the override).
func (s *synthesized) logicalID(c constructs.IConstruct) string {
	cfn := c.Node().DefaultChild().(awscdk.CfnElement)
	id, ok := s.W.Stack.Resolve(cfn.LogicalId()).(string)
	if !ok {
		panic(fmt.Sprintf("logical id of %s resolves to %v", *c.Node().Path(), s.W.Stack.Resolve(cfn.LogicalId())))
	}
	return id
}

// asJSON renders v compactly for comparisons and messages.
func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// validationReport lists the violations of the validation report a failed
// synthesis wrote to outdir, one "rule at path" a line ("" without one).
func validationReport(outdir string) string {
	raw, err := os.ReadFile(filepath.Join(outdir, "validation-report.json"))
	if err != nil {
		return ""
	}
	var rep struct {
		PluginReports []struct {
			Violations []struct {
				Description         string `json:"description"`
				ViolatingConstructs []struct {
					ConstructPath string `json:"constructPath"`
				} `json:"violatingConstructs"`
			} `json:"violations"`
		} `json:"pluginReports"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return "\nvalidation-report.json: " + err.Error()
	}
	var b strings.Builder
	for _, p := range rep.PluginReports {
		for _, v := range p.Violations {
			rule, _, _ := strings.Cut(v.Description, ":")
			for _, c := range v.ViolatingConstructs {
				fmt.Fprintf(&b, "\n  %s at %s", rule, c.ConstructPath)
			}
		}
	}
	return b.String()
}
