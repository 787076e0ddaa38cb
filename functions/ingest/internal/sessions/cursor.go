package sessions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// cursor is a list position: the by_state_expiry key of the last item read.
// It travels to clients as unpadded base64url JSON. It is not secret (it
// names one connection_id of the listed state); it is checked on the way back.
type cursor struct {
	ID      string `json:"id"`
	State   string `json:"st"`
	Expires string `json:"exp"`
}

func encodeCursor(last map[string]types.AttributeValue) (string, error) {
	var c cursor
	var ok1, ok2 bool
	c.ID, ok1 = str(last, schema.AttrPk)
	c.State, ok2 = str(last, schema.AttrDesiredState)
	exp, ok3 := num(last, schema.AttrLeaseExpiresAtMs)
	if !ok1 || !ok2 || !ok3 {
		return "", fmt.Errorf("encode cursor: unexpected last evaluated key")
	}
	c.Expires = strconv.FormatInt(exp, 10)
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// MaxCursorLen bounds the cursor a client may send back.
const MaxCursorLen = 512

func decodeCursor(s, state string) (map[string]types.AttributeValue, error) {
	if len(s) > MaxCursorLen {
		return nil, fmt.Errorf("%w: too long", ErrInvalidCursor)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrInvalidCursor)
	}
	var c cursor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return nil, fmt.Errorf("%w: not a cursor", ErrInvalidCursor)
	}
	if !notify.ConnectionIDPattern.MatchString(c.ID) {
		return nil, fmt.Errorf("%w: bad connection id", ErrInvalidCursor)
	}
	if c.State != state {
		return nil, fmt.Errorf("%w: cursor is for another state", ErrInvalidCursor)
	}
	exp, err := strconv.ParseInt(c.Expires, 10, 64)
	if err != nil || exp < 0 {
		return nil, fmt.Errorf("%w: bad position", ErrInvalidCursor)
	}
	return map[string]types.AttributeValue{
		schema.AttrPk:               &types.AttributeValueMemberS{Value: c.ID},
		schema.AttrDesiredState:     &types.AttributeValueMemberS{Value: c.State},
		schema.AttrLeaseExpiresAtMs: &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)},
	}, nil
}
