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
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// cursor is a list position: an index shard and, within it, the
// by_shard_expiry key of the last item read (none: the shard's start). It
// travels to clients as unpadded base64url JSON. It is not secret (it names
// one connection_id of the listed state); it is checked on the way back.
type cursor struct {
	State   string `json:"st"`
	Shard   int    `json:"sh"`
	ID      string `json:"id,omitempty"`
	Expires string `json:"exp,omitempty"`
}

// encodeCursor is the position at shard of state, after last (nil: the
// shard's start).
func encodeCursor(state string, shard int, last map[string]types.AttributeValue) (string, error) {
	c := cursor{State: state, Shard: shard}
	if last != nil {
		k, err := sessionitem.Decode(last)
		_, hasExp := last[schema.AttrLeaseExpiresAtMs]
		if err != nil || k.ConnectionID == "" || !hasExp || k.IndexShard != schema.IndexShardKey(state, shard) {
			return "", fmt.Errorf("encode cursor: unexpected last evaluated key")
		}
		c.ID, c.Expires = k.ConnectionID, strconv.FormatInt(k.LeaseExpiresAtMs, 10)
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
	if c.ID == "" && c.Expires == "" {
		return c.Shard, nil, nil
	}
	if !notify.ValidConnectionID(c.ID) || schema.IndexShardOf(c.ID) != c.Shard {
		return 0, nil, fmt.Errorf("%w: bad connection id", ErrInvalidCursor)
	}
	exp, err := strconv.ParseInt(c.Expires, 10, 64)
	if err != nil || exp < 0 {
		return 0, nil, fmt.Errorf("%w: bad position", ErrInvalidCursor)
	}
	return c.Shard, sessionitem.IndexKey(c.ID, schema.IndexShardKey(state, c.Shard), exp), nil
}
