package dynamostore

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

// CreateTableInput is the sessions table as the schema defines it (the infra
// app's table is tested against the same names).
func CreateTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(schema.AttrPk), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(schema.AttrIndexShard), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(schema.AttrLeaseExpiresAtMs), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(schema.AttrPk), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(schema.IndexByShardExpiry),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(schema.AttrIndexShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(schema.AttrLeaseExpiresAtMs), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
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
