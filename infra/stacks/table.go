package stacks

// The sessions table: its keys and indexes from shared/schema, and the per-
// key grants.

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// newTable creates the sessions table. With cfg.TableCMK the table (and its
// point-in-time backups) is encrypted with a customer-managed key of its own,
// so reading the handshake headers stored in it takes kms:Decrypt on that
// key as well as table access; otherwise DynamoDB's AWS-owned key is used.
func newTable(stack awscdk.Stack, cfg EnvConfig, removal awscdk.RemovalPolicy) (awsdynamodb.Table, awskms.Key) {
	var key awskms.Key
	encryption := awsdynamodb.TableEncryption_DEFAULT
	if cfg.TableCMK {
		key = awskms.NewKey(stack, jsii.String("TableKey"), &awskms.KeyProps{
			Description:       jsii.String("wsfleet sessions table (handshake headers at rest)"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     removal,
		})
		encryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED
	}
	table := awsdynamodb.NewTable(stack, jsii.String("Sessions"), &awsdynamodb.TableProps{
		Encryption:    encryption,
		EncryptionKey: key,
		PartitionKey:  &awsdynamodb.Attribute{Name: jsii.String(schema.AttrPk), Type: attrType(schema.TypeString)},
		BillingMode:   awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(cfg.Retain),
		// Nonce items of signed requests and DEAD or LEFT worker records
		// (one day after they ended) expire (schema.NonceKey, schema.WorkerKey).
		TimeToLiveAttribute: jsii.String(schema.AttrExpiresAt),
		RemovalPolicy:       removal,
	})
	if cfg.TableWarmWrites > 0 {
		// Pre-warmed (TableV2's warmThroughput; the Table construct has no
		// prop for it, and moving to TableV2 would replace the table).
		cfn := table.Node().DefaultChild().(awsdynamodb.CfnTable)
		cfn.SetWarmThroughput(&awsdynamodb.CfnTable_WarmThroughputProperty{WriteUnitsPerSecond: jsii.Number(cfg.TableWarmWrites)})
	}
	str := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: attrType(schema.TypeString)}
	}
	for _, g := range Indexes {
		props := &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(g.Name),
			PartitionKey:   str(g.Hash),
			ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
		}
		if g.Sort != "" {
			props.SortKey = str(g.Sort)
		}
		if len(g.Include) > 0 {
			props.ProjectionType = awsdynamodb.ProjectionType_INCLUDE
			props.NonKeyAttributes = jsii.Strings(g.Include...)
		}
		table.AddGlobalSecondaryIndex(props)
	}
	return table, key
}

// Index is one of the table's global secondary indexes: string keys, KEYS_ONLY
// unless Include names projected attributes.
type Index struct {
	Name, Hash, Sort string
	Include          []string
}

// Indexes are the table's GSIs, as shared/sessionitem's CreateTableInput
// defines them (the local stack and the tests create the table from it;
// the infra tests hold their own copy from schema names). Nothing they
// index changes on a heartbeat or a checkpoint.
var Indexes = []Index{
	{Name: schema.IndexByState, Hash: schema.AttrIndexShard, Sort: schema.AttrPk},
	{Name: schema.IndexByOwner, Hash: schema.AttrLeaseOwner,
		Include: []string{schema.AttrLeaseEpoch, schema.AttrDesiredState, schema.AttrGeneration}},
	{Name: schema.IndexByUnowned, Hash: schema.AttrUnownedShard, Sort: schema.AttrPk},
	{Name: schema.IndexByWorkerList, Hash: schema.AttrWorkerList, Sort: schema.AttrPk},
}

// TableKeyActions are what a principal of the table needs on its
// customer-managed key, only through DynamoDB (kms:ViaService).
var TableKeyActions = []string{"kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"}

// grantTableKey lets role use the table's key through DynamoDB in this
// region; nothing when the table uses the AWS-owned key.
func grantTableKey(stack awscdk.Stack, key awskms.Key, role awsiam.IRole) {
	if key == nil {
		return
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SessionsTableKey"),
		Actions:   jsii.Strings(TableKeyActions...),
		Resources: &[]*string{key.KeyArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"kms:ViaService": "dynamodb." + *stack.Region() + ".amazonaws.com",
		}},
	}))
}

func attrType(t string) awsdynamodb.AttributeType {
	if t == schema.TypeNumber {
		return awsdynamodb.AttributeType_NUMBER
	}
	return awsdynamodb.AttributeType_STRING
}
