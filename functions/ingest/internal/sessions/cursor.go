package sessions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// cursor is a list position: an index shard and, within it, the connection
// id of the last item read (its by_state key; none: the shard's start). It
// travels to clients as unpadded base64url JSON. It is not secret (it names
// one connection_id of the listed state); it is checked on the way back.
type cursor struct {
	State string `json:"st"`
	Shard int    `json:"sh"`
	ID    string `json:"id,omitempty"`
}

// encodeCursor is the position at shard of state, after last (nil: the
// shard's start).
func encodeCursor(state string, shard int, last map[string]types.AttributeValue) (string, error) {
	c := cursor{State: state, Shard: shard}
	if last != nil {
		k, err := sessionitem.Decode(last)
		if err != nil || k.ConnectionID == "" || k.IndexShard != schema.IndexShardKey(state, shard) {
			return "", fmt.Errorf("encode cursor: unexpected last evaluated key")
		}
		c.ID = k.ConnectionID
	}
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// MaxCursorLen bounds the cursor a client may send back.
const MaxCursorLen = 512

// decodeCursor returns the shard to read and the key to start after (nil:
// the shard's start).
func decodeCursor(s, state string) (int, map[string]types.AttributeValue, error) {
	if len(s) > MaxCursorLen {
		return 0, nil, fmt.Errorf("%w: too long", ErrInvalidCursor)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: not base64url", ErrInvalidCursor)
	}
	var c cursor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() {
		return 0, nil, fmt.Errorf("%w: not a cursor", ErrInvalidCursor)
	}
	if c.State != state {
		return 0, nil, fmt.Errorf("%w: cursor is for another state", ErrInvalidCursor)
	}
	if c.Shard < 0 || c.Shard >= schema.IndexShards {
		return 0, nil, fmt.Errorf("%w: bad shard", ErrInvalidCursor)
	}
	if c.ID == "" {
		return c.Shard, nil, nil
	}
	if !notify.ValidConnectionID(c.ID) || schema.IndexShardOf(c.ID) != c.Shard {
		return 0, nil, fmt.Errorf("%w: bad connection id", ErrInvalidCursor)
	}
	return c.Shard, sessionitem.StateIndexKey(c.ID, schema.IndexShardKey(state, c.Shard)), nil
}
