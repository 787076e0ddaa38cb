package sessionitem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// TableAdmin is the part of the DynamoDB client CreateTable calls.
type TableAdmin interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

func attrDef(name string, t types.ScalarAttributeType) types.AttributeDefinition {
	return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: t}
}

func gsi(name, hash, sort string, proj *types.Projection) types.GlobalSecondaryIndex {
	ks := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
	if sort != "" {
		ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(sort), KeyType: types.KeyTypeRange})
	}
	return types.GlobalSecondaryIndex{IndexName: aws.String(name), KeySchema: ks, Projection: proj}
}

var keysOnly = &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}

// OwnerIndexProjection is what by_owner carries besides the keys: what a
// takeover's conditional acquire and an owner's audit need.
var OwnerIndexProjection = []string{schema.AttrLeaseEpoch, schema.AttrDesiredState, schema.AttrGeneration}

// CreateTableInput is the sessions table as the schema defines it (the infra
// app's table is tested against the same names): sessions, their checkpoint
// items and the worker records, with the four indexes of schema.IndexBy*.
func CreateTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			attrDef(schema.AttrPk, types.ScalarAttributeTypeS),
			attrDef(schema.AttrIndexShard, types.ScalarAttributeTypeS),
			attrDef(schema.AttrLeaseOwner, types.ScalarAttributeTypeS),
			attrDef(schema.AttrUnownedShard, types.ScalarAttributeTypeS),
			attrDef(schema.AttrWorkerList, types.ScalarAttributeTypeS),
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(schema.AttrPk), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			gsi(schema.IndexByState, schema.AttrIndexShard, schema.AttrPk, keysOnly),
			gsi(schema.IndexByOwner, schema.AttrLeaseOwner, "", &types.Projection{
				ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: OwnerIndexProjection,
			}),
			gsi(schema.IndexByUnowned, schema.AttrUnownedShard, schema.AttrPk, keysOnly),
			gsi(schema.IndexByWorkerList, schema.AttrWorkerList, schema.AttrPk, keysOnly),
		},
	}
}

// CreateTable creates the sessions table if it does not exist and waits until
// it is ACTIVE. It is for the local stack and tests; in AWS the infra app owns
// the table.
func CreateTable(ctx context.Context, api TableAdmin, name string) error {
	_, err := api.CreateTable(ctx, CreateTableInput(name))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	for {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", name, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create table %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
