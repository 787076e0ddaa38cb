package spec

import (
	"encoding/json"
	"fmt"

	"github.com/wsfleet/wsfleet/shared/source"
)

// MaxStoredBytes bounds a spec's stored form (Encode: the session item's
// spec attribute), checked on the encoded bytes, not on what a body
// decoded to: JSON escaping makes the stored form larger than the decoded
// values (a control character or U+2028 takes six bytes, a binary open
// message grows by a third in base64), and DynamoDB caps an item at 400 KB
// and bills every write of it on its whole size (1 KB units; Developer
// Guide, "Service, account, and table quotas" and "Capacity unit
// consumption for write operations"). With the item's other attributes
// (MaxItemOverheadBytes) a session item stays under MaxItemBytes.
const MaxStoredBytes = 192 << 10

// MaxItemOverheadBytes bounds what a session item holds besides its spec:
// the connection id, the lease and desired-state attributes, last_error
// (at most 256 bytes), the attribute names.
const MaxItemOverheadBytes = 8 << 10

// MaxItemBytes is the bound on a session item's size: well below
// DynamoDB's 400 KB. An acquire, release or hand-off of a session at the
// bound writes about 200 write units, a consistent read of it 50 read
// units (docs/api.md, "Limits").
const MaxItemBytes = MaxStoredBytes + MaxItemOverheadBytes

// checkStored refuses a checked spec whose stored form is over
// MaxStoredBytes, naming the top-level field whose stored form is the
// largest (the one to make smaller).
func (s Spec) checkStored() *source.FieldError {
	enc, err := s.Encode()
	if err != nil {
		return bad("body", "the session's configuration cannot be encoded")
	}
	if len(enc) <= MaxStoredBytes {
		return nil
	}
	field, size := "body", 0
	var top map[string]json.RawMessage
	if json.Unmarshal([]byte(enc), &top) == nil {
		for k, v := range top {
			if len(v) > size || len(v) == size && k < field {
				field, size = k, len(v)
			}
		}
	}
	return &source.FieldError{Field: field, Message: fmt.Sprintf(
		"the session's configuration is %d bytes as stored (JSON-escaped, binary in base64), at most %d; %s is the largest part (%d bytes)",
		len(enc), MaxStoredBytes, field, size)}
}
