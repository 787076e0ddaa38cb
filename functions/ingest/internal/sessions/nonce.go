package sessions

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// ErrReplay marks a signed request whose nonce was already used.
var ErrReplay = errors.New("nonce already used")

// RememberNonce records a signed request's nonce until until, with one
// conditional UpdateItem that creates its own item (schema.NonceKey; an
// UpdateItem, so ingest needs no PutItem grant), and fails with
// ErrReplay when the nonce is already there. DynamoDB's TTL deletes the item
// some time after until (schema.AttrExpiresAt, epoch seconds); until is past
// the end of the request's signature window, so a late delete cannot let a
// replay in: by then the timestamp the nonce was signed with is refused.
func (s *Store) RememberNonce(ctx context.Context, nonce string, until time.Time) error {
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(schema.NonceKey(nonce)),
		UpdateExpression:          aws.String("SET #exp = :exp"),
		ConditionExpression:       aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": schema.AttrPk, "#exp": schema.AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":exp": &types.AttributeValueMemberN{Value: strconv.FormatInt(until.Unix(), 10)}},
	})
	switch {
	case err == nil:
		return nil
	case isConditionFailed(err):
		return ErrReplay
	default:
		return unavailable("remember nonce", "", err)
	}
}
