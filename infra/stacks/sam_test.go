package stacks

// `sam local invoke` of the ingest function (mk/sam.mk, docs/infra.md): the
// command `make sam-invoke-cmd` prints against the template `make synth`
// writes, and the event files it hands the function.

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// samCommand is the `sam local invoke` line `make sam-invoke-cmd` prints,
// split into its parts (paths relative to the repo root), and the --env-vars
// file's content its comment shows ("# <file>: <JSON>").
type samCommand struct {
	Template, Function, Event, EnvVars string
	EnvVarsShown                       map[string]map[string]string
	Printed                            string // the whole output
}

var samLine = regexp.MustCompile(`^sam local invoke -t (\S+) (\S+) -e (\S+) --env-vars (\S+)$`)

// printedSamCommand runs `make sam-invoke-cmd` (with vars) in root and
// parses the command it prints.
func printedSamCommand(t *testing.T, root string, vars ...string) samCommand {
	t.Helper()
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// GO_TOOLCHAIN=local: the target builds nothing, so the Makefile need
	// not check that its pinned Go release is at hand.
	args := append([]string{"-s", "--no-print-directory", "-C", root, "GO_TOOLCHAIN=local", "sam-invoke-cmd"}, vars...)
	cmd := exec.CommandContext(ctx, makeBin, args...)
	// Run from `make test-infra`, the outer make's flags (its jobserver)
	// are not this one's.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL"
	})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make sam-invoke-cmd %v: %v\n%s%s", vars, err, out, stderr.Bytes())
	}
	var cmds []samCommand
	for line := range strings.Lines(string(out)) {
		if m := samLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			cmds = append(cmds, samCommand{Template: m[1], Function: m[2], Event: m[3], EnvVars: m[4]})
		} else if !strings.HasPrefix(line, "#") {
			t.Errorf("make sam-invoke-cmd printed %q: neither a comment nor the command", line)
		}
	}
	if len(cmds) != 1 {
		t.Fatalf("make sam-invoke-cmd %v printed %d sam local invoke commands, want 1:\n%s", vars, len(cmds), out)
	}
	c := cmds[0]
	c.Printed = string(out)
	for line := range strings.Lines(string(out)) {
		if doc, ok := strings.CutPrefix(strings.TrimSpace(line), "# "+c.EnvVars+": "); ok {
			if err := json.Unmarshal([]byte(doc), &c.EnvVarsShown); err != nil {
				t.Fatalf("make sam-invoke-cmd's %s line %q: %v", c.EnvVars, line, err)
			}
		}
	}
	if c.EnvVarsShown == nil {
		t.Fatalf("make sam-invoke-cmd %v shows no content of %s:\n%s", vars, c.EnvVars, out)
	}
	return c
}

// synthLikeCLI synthesizes env's stack into a new directory as `make synth`
// has the cdk CLI do (which turns on the asset and path metadata SAM reads)
// and returns that directory.
func synthLikeCLI(t *testing.T, root, envName string) string {
	t.Helper()
	ctx := cdkContext(t, root)
	maps.Copy(ctx, map[string]any{
		CtxEnv:                          envName,
		"aws:cdk:enable-asset-metadata": true,
		"aws:cdk:enable-path-metadata":  true,
	})
	outdir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(outdir)})
	if _, err := NewFromContext(app, root); err != nil {
		t.Fatalf("NewFromContext(%s): %v", envName, err)
	}
	if msg, failed := panics(func() { app.Synth(nil) }); failed {
		t.Fatalf("synthesis of %s failed: %s%s", envName, msg, validationReport(outdir))
	}
	return outdir
}

// TestSamInvokeCommand: the command `make sam-invoke-cmd` prints names the
// template `make synth` writes, the ingest function under its pinned logical
// id with the handler, runtime, architecture and code (an arm64 bootstrap)
// the events expect, and an event file of the HTTP API's; every event file
// is an API Gateway v2 HTTP event of a route the stack's API defines.
func TestSamInvokeCommand(t *testing.T) {
	root := repoRoot(t)
	cmd := printedSamCommand(t, root)
	if cmd.Function != IngestLogicalID {
		t.Errorf("printed function %q, want infra/stacks.IngestLogicalID %q (mk/sam.mk's SAM_FUNCTION)", cmd.Function, IngestLogicalID)
	}
	wantTemplate := filepath.Join("cdk.out", EnvDev, StackID(EnvDev)+".template.json")
	if cmd.Template != wantTemplate {
		t.Fatalf("printed template %q, want %q (make synth's -o cdk.out/<env>)", cmd.Template, wantTemplate)
	}
	if cmd.Event != filepath.Join(ingestEventsDir, "start.json") {
		t.Errorf("printed event %q, want %s/start.json", cmd.Event, ingestEventsDir)
	}
	if prod := printedSamCommand(t, root, "SAM_ENV="+EnvProd, "SAM_EVENT=status"); prod.Template != filepath.Join("cdk.out", EnvProd, StackID(EnvProd)+".template.json") ||
		prod.Event != filepath.Join(ingestEventsDir, "status.json") || prod.Function != IngestLogicalID {
		t.Errorf("SAM_ENV=prod SAM_EVENT=status printed %+v", prod)
	}

	// docs/infra.md shows what the target prints, line for line.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "infra.md"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(cmd.Printed) {
		if !bytes.Contains(doc, []byte("\n"+line)) {
			t.Errorf("docs/infra.md does not show the line make sam-invoke-cmd prints:\n%s", line)
		}
	}

	outdir := synthLikeCLI(t, root, EnvDev)
	raw, err := os.ReadFile(filepath.Join(outdir, filepath.Base(cmd.Template)))
	if err != nil {
		t.Fatalf("the synthesis wrote no %s: %v", filepath.Base(cmd.Template), err)
	}
	var tmpl struct{ Resources map[string]cfnResource }
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		t.Fatalf("%s: %v", cmd.Template, err)
	}
	fn, ok := tmpl.Resources[cmd.Function]
	if !ok || fn.Type != "AWS::Lambda::Function" {
		t.Fatalf("template has no AWS::Lambda::Function %q (have %v)", cmd.Function, slices.Sorted(maps.Keys(tmpl.Resources)))
	}
	p := fn.Properties
	if p["Handler"] != IngestBootstrap || p["Runtime"] != "provided.al2023" || asJSON(p["Architectures"]) != `["arm64"]` {
		t.Errorf("%s: Handler %v Runtime %v Architectures %v, want %s provided.al2023 [arm64]",
			cmd.Function, p["Handler"], p["Runtime"], asJSON(p["Architectures"]), IngestBootstrap)
	}
	// SAM hands the function the template's variables, but cannot resolve
	// the table's and queue's Ref to the deployed names (ingest refuses to
	// start without a queue URL): the --env-vars file gives them, and SAM
	// overrides only variables the template declares.
	fnEnv, _ := p["Environment"].(map[string]any)
	vars, _ := fnEnv["Variables"].(map[string]any)
	shown := cmd.EnvVarsShown[cmd.Function]
	if len(cmd.EnvVarsShown) != 1 || !slices.Equal(slices.Sorted(maps.Keys(shown)), []string{schema.EnvQueueURL, schema.EnvTableName}) {
		t.Errorf("%s shown as %v, want %s's %s and %s", cmd.EnvVars, cmd.EnvVarsShown, cmd.Function, schema.EnvTableName, schema.EnvQueueURL)
	}
	for name := range shown {
		if _, ok := vars[name].(map[string]any); !ok {
			t.Errorf("%s: %s = %s, want a Ref for the --env-vars file to override", cmd.Function, name, asJSON(vars[name]))
		}
	}
	// SAM finds the code through the asset metadata, relative to the
	// template's directory: the staged copy of bin/ingest.
	assetPath, _ := fn.Metadata["aws:asset:path"].(string)
	if fn.Metadata["aws:asset:property"] != "Code" || assetPath == "" {
		t.Fatalf("%s Metadata = %s, want aws:asset:path and aws:asset:property Code", cmd.Function, asJSON(fn.Metadata))
	}
	checkBootstrap(t, filepath.Join(outdir, assetPath, IngestBootstrap), filepath.Join(root, IngestAssetDir, IngestBootstrap))

	routes := apiRoutes(t, tmpl.Resources, cmd.Function)
	files, err := filepath.Glob(filepath.Join(root, ingestEventsDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no event files in %s (%v)", ingestEventsDir, err)
	}
	if !slices.Contains(files, filepath.Join(root, cmd.Event)) {
		t.Errorf("printed event %s is not among %v", cmd.Event, files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { checkHTTPEvent(t, f, routes) })
	}
}

// ingestEventsDir holds the ingest function's API Gateway v2 event files,
// relative to the repo root (mk/sam.mk's SAM_EVENTS_DIR; rie_test.go reads
// them too).
const ingestEventsDir = "functions/ingest/testdata/events"

// cfnResource is a resource of a template file.
type cfnResource struct {
	Type       string
	Properties map[string]any
	Metadata   map[string]any
}

// checkBootstrap: staged is the executable asset SAM mounts, the same bytes
// as built, a linux/arm64 program.
func checkBootstrap(t *testing.T, staged, built string) {
	t.Helper()
	st, err := os.Stat(staged)
	if err != nil {
		t.Fatalf("asset: %v", err)
	}
	if st.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s mode %v: not executable", staged, st.Mode())
	}
	a, errA := os.ReadFile(staged)
	b, errB := os.ReadFile(built)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("staged %s differs from %s (%v, %v)", staged, built, errA, errB)
	}
	f, err := elf.Open(staged)
	if err != nil {
		t.Fatalf("%s: %v", staged, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || (f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX) {
		t.Errorf("%s: ELF machine %v OSABI %v, want a linux/arm64 program", staged, f.Machine, f.OSABI)
	}
}

// apiRoutes returns the template's HTTP API routes that reach function
// (their route keys), after checking that the integration hands it
// payload format 2.0, the events' version.
func apiRoutes(t *testing.T, resources map[string]cfnResource, function string) map[string]bool {
	t.Helper()
	toFunction := map[string]bool{} // integration logical ids
	for id, r := range resources {
		if r.Type != "AWS::ApiGatewayV2::Integration" {
			continue
		}
		uri := asJSON(r.Properties["IntegrationUri"])
		if uri != asJSON(map[string]any{"Fn::GetAtt": []any{function, "Arn"}}) {
			continue
		}
		toFunction[id] = true
		if r.Properties["IntegrationType"] != "AWS_PROXY" || r.Properties["PayloadFormatVersion"] != "2.0" {
			t.Errorf("integration %s: type %v payload %v, want AWS_PROXY 2.0", id, r.Properties["IntegrationType"], r.Properties["PayloadFormatVersion"])
		}
	}
	if len(toFunction) == 0 {
		t.Fatalf("no AWS::ApiGatewayV2::Integration reaches %s", function)
	}
	routes := map[string]bool{}
	for _, r := range resources {
		if r.Type != "AWS::ApiGatewayV2::Route" {
			continue
		}
		target := asJSON(r.Properties["Target"])
		for integ := range toFunction {
			if strings.Contains(target, `{"Ref":"`+integ+`"}`) {
				key, _ := r.Properties["RouteKey"].(string)
				routes[key] = true
			}
		}
	}
	if len(routes) != len(IngestRoutes) {
		t.Errorf("routes to %s: %v, want the %d of IngestRoutes", function, slices.Sorted(maps.Keys(routes)), len(IngestRoutes))
	}
	return routes
}

// httpEvent is the part of an API Gateway v2 HTTP event (payload format
// 2.0) that routes it.
type httpEvent struct {
	Version        string            `json:"version"`
	RouteKey       string            `json:"routeKey"`
	RawPath        string            `json:"rawPath"`
	PathParameters map[string]string `json:"pathParameters"`
	RequestContext struct {
		RouteKey string `json:"routeKey"`
		Stage    string `json:"stage"`
		HTTP     struct {
			Method string `json:"method"`
			Path   string `json:"path"`
		} `json:"http"`
	} `json:"requestContext"`
}

var pathParam = regexp.MustCompile(`\{([^}/]+)\}`)

// checkHTTPEvent: the file is an API Gateway v2 HTTP event of one of
// routes, its method, path and path parameters those of that route.
func checkHTTPEvent(t *testing.T, file string, routes map[string]bool) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ev httpEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if ev.Version != "2.0" {
		t.Errorf("version %q, want 2.0", ev.Version)
	}
	if !routes[ev.RouteKey] {
		t.Fatalf("routeKey %q is not a route of the API (%v)", ev.RouteKey, slices.Sorted(maps.Keys(routes)))
	}
	method, route, _ := strings.Cut(ev.RouteKey, " ")
	rc := ev.RequestContext
	if rc.RouteKey != ev.RouteKey || rc.HTTP.Method != method || rc.Stage != "$default" {
		t.Errorf("requestContext routeKey %q http.method %q stage %q, want %q %q $default", rc.RouteKey, rc.HTTP.Method, rc.Stage, ev.RouteKey, method)
	}
	// The route's path with the event's path parameters put in.
	var names []string
	path := pathParam.ReplaceAllStringFunc(route, func(m string) string {
		name := m[1 : len(m)-1]
		names = append(names, name)
		return ev.PathParameters[name]
	})
	if !slices.Equal(slices.Sorted(maps.Keys(ev.PathParameters)), slices.Sorted(slices.Values(names))) {
		t.Errorf("pathParameters %v, want exactly %v", ev.PathParameters, names)
	}
	if ev.RawPath != path || rc.HTTP.Path != path {
		t.Errorf("rawPath %q requestContext.http.path %q, want %q (route %s)", ev.RawPath, rc.HTTP.Path, path, route)
	}
}
