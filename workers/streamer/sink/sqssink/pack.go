package sqssink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// Packing (batch.Packer): a message of the queue carries a pack, the
// envelopes of consecutive messages of one session and one tenure as JSON
// lines, in the format consume documents (version 1, consume.PackV1, named
// by the consume.ContentTypeAttribute message attribute). SQS bills each
// 64 KB chunk of a request's payload as one request (SQS pricing page,
// https://aws.amazon.com/sqs/pricing/: "each 64 KB chunk of a payload is
// billed as 1 request"), and a SendMessageBatch of 10 messages is one
// request: packs fill that chunk instead of holding one message each.
const (
	// DefaultPackBytes bounds a pack's Size (its body and its attribute)
	// by default: under the 64 KB billing chunk whether KB means 1,000 or
	// 1,024 bytes, so a pack is billed as one request at most.
	DefaultPackBytes = 64000
	// MaxPackBytes is SQS's message limit: a pack is one message.
	MaxPackBytes = MaxMessageBytes
)

// Config are the sqs sink's settings.
type Config struct {
	// PackBytes bounds a pack's Size (its body and its content-type
	// attribute, which SQS counts toward the message's size); 0 turns
	// packing off (one envelope per message, no attribute).
	PackBytes int
}

// DefaultConfig packs up to DefaultPackBytes.
func DefaultConfig() Config { return Config{PackBytes: DefaultPackBytes} }

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.PackBytes < 0 || c.PackBytes > MaxPackBytes {
		errs = append(errs, fmt.Errorf("sqs pack bytes %d: want 0 (off) up to SQS's message limit, %d", c.PackBytes, MaxPackBytes))
	}
	return errors.Join(errs...)
}

// attrBytes is what the content-type attribute counts toward a message's
// size: "All parts of the message attribute, including Name, Type, and
// Value, are part of the message size restriction" (SQS API reference,
// MessageAttributeValue).
var attrBytes = len(consume.ContentTypeAttribute) + len("String") + len(consume.PackV1)

// PackLimit is the configured pack bound (batch.Packer).
func (s *Sink) PackLimit() int { return s.packBytes }

// PackGrow is the Size of a pack of size bytes once r joins it, on its own
// line (batch.Packer).
func (s *Sink) PackGrow(size int, r batch.Record) int {
	if size == 0 {
		return attrBytes + len(r.Body)
	}
	return size + 1 + len(r.Body)
}

// PackGroup is r's session: a pack holds one session's messages
// (batch.Packer).
func (s *Sink) PackGroup(r batch.Record) string { return r.ConnectionID }

// Pack joins the envelopes of recs, one session's consecutive messages of
// one tenure, into one body (batch.Packer). The pack is named by its first
// message (Seq, Sub); its FIFO deduplication id also names its last
// (DedupIDRange). A pack of one is the message's own record.
func (s *Sink) Pack(recs []batch.Record) (batch.Record, error) {
	if len(recs) == 0 {
		return batch.Record{}, errors.New("sqs sink: an empty pack")
	}
	first := recs[0]
	if len(recs) == 1 {
		return first, nil
	}
	size := 0
	for i, r := range recs {
		if r.ConnectionID != first.ConnectionID || r.Epoch != first.Epoch {
			return batch.Record{}, fmt.Errorf("sqs sink: a pack of %s epoch %d holds %s epoch %d", first.ConnectionID, first.Epoch, r.ConnectionID, r.Epoch)
		}
		if i > 0 && !before(recs[i-1], r) {
			return batch.Record{}, fmt.Errorf("sqs sink: a pack of %s holds seq %d.%d after %d.%d", first.ConnectionID, r.Seq, r.Sub, recs[i-1].Seq, recs[i-1].Sub)
		}
		size = s.PackGrow(size, r)
	}
	if size > s.packBytes || size > MaxMessageBytes {
		return batch.Record{}, fmt.Errorf("sqs sink: a pack of %d messages of %s is %d bytes, over the pack limit %d", len(recs), first.ConnectionID, size, min(s.packBytes, MaxMessageBytes))
	}
	body := make([]byte, 0, size-attrBytes)
	for i, r := range recs {
		if i > 0 {
			body = append(body, '\n')
		}
		body = append(body, r.Body...)
	}
	return batch.Record{ConnectionID: first.ConnectionID, Seq: first.Seq, Sub: first.Sub, Epoch: first.Epoch, Body: body}, nil
}

// before reports whether a's position comes before b's.
func before(a, b batch.Record) bool { return a.Seq < b.Seq || (a.Seq == b.Seq && a.Sub < b.Sub) }

// lastPosition is the (seq, sub) of a body's last envelope: the head of
// its last line, read up to received_at_ms (sink.AppendEnvelope writes
// seq and sub before it), not its payload.
func lastPosition(body []byte) (seq, sub int64, err error) {
	line := body[bytes.LastIndexByte(body, '\n')+1:]
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, fmt.Errorf("sqs sink: a pack's last envelope: not an object (%v)", err)
	}
	haveSeq := false
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return 0, 0, fmt.Errorf("sqs sink: a pack's last envelope: %w", err)
		}
		key, _ := t.(string)
		if key == "received_at_ms" {
			break
		}
		var v any
		if err := d.Decode(&v); err != nil {
			return 0, 0, fmt.Errorf("sqs sink: a pack's last envelope: %s: %w", key, err)
		}
		n, isNum := v.(json.Number)
		switch {
		case key == "seq" && isNum:
			seq, err = n.Int64()
			haveSeq = err == nil
		case key == "sub" && isNum:
			sub, err = n.Int64()
		}
		if err != nil {
			return 0, 0, fmt.Errorf("sqs sink: a pack's last envelope: %s: %w", key, err)
		}
	}
	if !haveSeq {
		return 0, 0, fmt.Errorf("sqs sink: a pack's last envelope: no seq before received_at_ms: %w", io.ErrUnexpectedEOF)
	}
	return seq, sub, nil
}

var _ batch.Packer = (*Sink)(nil)
