// Command infra is wsfleet's CDK app: it synthesizes the stack of the
// environment named by the `env` context value (cdk.json defaults it to dev;
// `cdk synth -c env=prod` picks prod). Run it through the cdk CLI from the
// repo root; see docs/infra.md.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/infra/stacks"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
)

// main is cmdmain's, as every wsfleet command's: an error is printed as
// "infra: …" and exits 1. A synth is not interruptible midway (the jsii
// calls are synchronous); Ctrl-C reaches the cdk CLI and its jsii child
// too, which ends it.
func main() {
	cmdmain.Run("infra", func(context.Context) error { return run() })
}

func run() error {
	defer jsii.Close()
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	root, err := stacks.FindRepoRoot(cwd)
	if err != nil {
		return err
	}
	app := awscdk.NewApp(nil)
	if _, err := stacks.NewFromContext(app, root); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
