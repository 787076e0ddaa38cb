package stacks

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// The sessions table grants: each role gets the DynamoDB actions its code
// calls, the indexes it queries and, where a write only ever goes to one
// kind of item, only that key prefix. What the code calls (every DynamoDB
// call, read from the source):
//
//   - streamer (shared/lease/dynamostore): UpdateItem and GetItem on
//     session (their checkpoint on them), spec (spec#) and worker
//     (worker#) items; BatchGetItem of worker records; PutItem only
//     in Register, of its own worker# record; Query of by_unowned
//     (Unowned), by_owner (OwnedBy) and by_worker_list (ListWorkers).
//     Never by_state, never the base table's key.
//   - ingest (functions/ingest/internal/sessions): UpdateItem of session
//     items, of spec# items, of a worker# record's mailbox and of nonce#
//     items (an UpdateItem that creates them, so no PutItem); DeleteItem
//     only of a superseded spec# item; GetItem of a session; BatchGetItem
//     of sessions, checkpoints, spec items and worker records; Query of
//     by_state (List) and by_worker_list (Workers). Never by_owner or
//     by_unowned.
//
// Neither calls DescribeTable, Scan, BatchWriteItem or the
// transaction APIs (CreateTable is the local stack's and the tests', never
// a deployed component's). dynamodb:Attributes is not used: the writes
// return whole items (ReturnValues ALL_NEW/ALL_OLD, which attribute-level
// grants refuse) and every update names different attributes, so the list
// would be each role's whole item schema. The tests hold their own copy of
// these lists, so widening a grant is a visible change.
var (
	// StreamerTableActions are granted on the table's own ARN, any key.
	StreamerTableActions = []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}
	// StreamerWorkerActions are granted on the table for worker records
	// only: dynamodb:LeadingKeys (the Pk of the item written) must match
	// WorkerLeadingKeys.
	StreamerWorkerActions = []string{"dynamodb:PutItem"}
	// StreamerIndexes are the indexes the streamer may Query.
	StreamerIndexes = []string{schema.IndexByOwner, schema.IndexByUnowned, schema.IndexByWorkerList}

	IngestTableActions = []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}
	IngestIndexes      = []string{schema.IndexByState, schema.IndexByWorkerList}
	// IngestSpecActions are granted on the table for spec items only
	// (dynamodb:LeadingKeys must match SpecLeadingKeys): a start deletes
	// the spec item it superseded.
	IngestSpecActions = []string{"dynamodb:DeleteItem"}

	// IndexActions are what a role may do on an index it reads.
	IndexActions = []string{"dynamodb:Query"}
)

// WorkerLeadingKeys is the dynamodb:LeadingKeys pattern of worker records
// (schema.WorkerKey): a StringLike pattern, so "*" is a pattern here, not
// a resource wildcard.
var WorkerLeadingKeys = schema.WorkerKeyPrefix + "*"

// SpecLeadingKeys is the dynamodb:LeadingKeys pattern of spec items
// (schema.SpecKey).
var SpecLeadingKeys = schema.SpecKeyPrefix + "*"

// grantStreamerTable adds the streamer task role's table statements.
func grantStreamerTable(role awsiam.IRole, table awsdynamodb.Table) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionsTable"),
		Actions:   jsii.Strings(StreamerTableActions...),
		Resources: &[]*string{table.TableArn()},
	}))
	// ForAllValues: LeadingKeys is a multivalued key (a batch names many
	// keys); a PutItem always names exactly one, its Pk, so the set is
	// never empty.
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("WorkerRecordRegister"),
		Actions:   jsii.Strings(StreamerWorkerActions...),
		Resources: &[]*string{table.TableArn()},
		Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{
			"dynamodb:LeadingKeys": []string{WorkerLeadingKeys},
		}},
	}))
	grantIndexes(role, table, StreamerIndexes)
}

// grantIngestTable adds the ingest role's table statements.
func grantIngestTable(role awsiam.IRole, table awsdynamodb.Table) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionsTable"),
		Actions:   jsii.Strings(IngestTableActions...),
		Resources: &[]*string{table.TableArn()},
	}))
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SpecItemDelete"),
		Actions:   jsii.Strings(IngestSpecActions...),
		Resources: &[]*string{table.TableArn()},
		Conditions: &map[string]any{"ForAllValues:StringLike": map[string]any{
			"dynamodb:LeadingKeys": []string{SpecLeadingKeys},
		}},
	}))
	grantIndexes(role, table, IngestIndexes)
}

// grantIndexes lets role Query the named indexes, each by its own ARN
// (never "/index/*").
func grantIndexes(role awsiam.IRole, table awsdynamodb.Table, names []string) {
	arns := make([]*string, 0, len(names))
	for _, n := range names {
		arns = append(arns, indexArn(table, n))
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionsIndexes"),
		Actions:   jsii.Strings(IndexActions...),
		Resources: &arns,
	}))
}

func indexArn(table awsdynamodb.Table, name string) *string {
	return jsii.String(*table.TableArn() + "/index/" + name)
}
