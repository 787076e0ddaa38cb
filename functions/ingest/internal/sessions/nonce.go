package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
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
	in, err := sessionitem.Update(s.table, schema.NonceKey(nonce),
		expression.Set(sessionitem.ExpiresAt, expression.Value(until.Unix())),
		expression.AttributeNotExists(sessionitem.Pk))
	if err != nil {
		return fmt.Errorf("remember nonce: %w", err)
	}
	_, err = s.api.UpdateItem(ctx, in)
	switch {
	case err == nil:
		return nil
	case isConditionFailed(err):
		return ErrReplay
	default:
		return unavailable("remember nonce", "", err)
	}
}
