package stacks

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// CheckCompliance adds cdk-nag's AwsSolutions pack to scope as an aspect:
// when the app synthesizes, every resource under scope is checked and each
// finding not suppressed (suppress) becomes an error or warning annotation
// on the resource. CDK fails the synthesis on an error annotation (cdk
// synth and the tests); the tests fail on the warnings too.
// NewWsfleetStack adds it to every stack, so the CLI's synth and the tests
// check the same thing.
func CheckCompliance(scope constructs.IConstruct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{
		// A report file in the cloud assembly
		// (AwsSolutions--<stack>-NagReport.csv) lists every rule's outcome,
		// suppressions with their reasons.
		Reports: jsii.Bool(true),
		Verbose: jsii.Bool(true),
	}), nil)
}

// suppress accepts cdk-nag rule (e.g. "AwsSolutions-ECS2") on c and its
// children, for reason. appliesTo, when given, limits it to those findings
// of the rule (e.g. "Resource::*"), so a new finding of the same rule on c
// is still reported. Call it next to the construct it is about.
func suppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		at := make([]any, len(appliesTo))
		for i, a := range appliesTo {
			at[i] = a
		}
		s.AppliesTo = &at
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}
