// Records by their envelope: the Key the proxy stamps and refuses a record
// by, and the keys of the envelopes an SQS message or a Kinesis record
// carries (consume's parser, the one users import).

package sinkfault

import (
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// Key names one record by its envelope.
type Key struct {
	Session string
	Seq     int64
	Sub     int64
	Epoch   int64
	Worker  string
}

// Envelope is the sink's envelope as the harness reads it: consume's (the
// one parser of the envelope, the one users import).
type Envelope = consume.Envelope

// Payload forms (Envelope.Form).
const (
	FormJSON   = consume.FormJSON
	FormString = consume.FormString
	FormB64    = consume.FormB64
	FormNone   = consume.FormNone
)

// ParseEnvelope parses one record body holding one envelope.
func ParseEnvelope(b []byte) (Envelope, error) { return consume.Parse(b) }

// KeyOf is the envelope's record key.
func KeyOf(e Envelope) Key {
	return Key{Session: e.ConnectionID, Seq: e.Seq, Sub: e.Sub, Epoch: e.LeaseEpoch, Worker: e.WorkerID}
}

// keysOf are the record keys of the envelopes an SQS message carries (a
// pack: consume.FromSQS); a body that is none has one zero key.
func keysOf(body, contentType string) []Key { return envelopeKeys(consume.FromSQS(body, contentType)) }

// envelopeKeys are the record keys of the envelopes a record carries; a
// record that carries none (err) has one zero key.
func envelopeKeys(envs []consume.Envelope, err error) []Key {
	if err != nil || len(envs) == 0 {
		return []Key{{}}
	}
	keys := make([]Key, len(envs))
	for i, e := range envs {
		keys[i] = KeyOf(e)
	}
	return keys
}

// permanentKey is the key a permanent refusal is remembered by: whatever
// the tenure and worker.
func permanentKey(k Key) Key { return Key{Session: k.Session, Seq: k.Seq, Sub: k.Sub} }

// recordKeys are the keys of a Kinesis record's messages: one for a plain
// record, one per user record of a KPL aggregated one (kinesissink).
func recordKeys(data []byte) []Key { return envelopeKeys(consume.FromKinesis(data)) }
