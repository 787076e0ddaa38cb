package sqssink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/internal/packorder"
)

// Packing (batch.Packer): a message of the queue carries a pack, envelopes
// as JSON lines in the format consume documents, named by the
// consume.ContentTypeAttribute message attribute. On a FIFO queue a pack
// holds consecutive messages of one session and one tenure (version 1,
// consume.PackV1: the group id and deduplication id are the session's). On
// a standard queue every session may share a pack (PackGroup ""): a pack of
// one session and tenure is version 1, a pack of several is version 2
// (consume.PackV2), each session's envelopes in its (seq, sub) order within
// a tenure. SQS bills each
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
// MessageAttributeValue). Both versions' content types are as long.
var attrBytes = len(consume.ContentTypeAttribute) + len("String") + max(len(consume.PackV1), len(consume.PackV2))

// PackGroup is what records must share to share a pack (batch.Packer): on
// a FIFO queue the session (its group id and deduplication ids are per
// session), on a standard queue nothing ("").
func (s *Sink) PackGroup(r batch.Record) string {
	if s.fifo {
		return r.ConnectionID
	}
	return ""
}

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

// Pack joins the envelopes of recs into one body (batch.Packer): on a FIFO
// queue one session's consecutive messages of one tenure, on a standard
// queue messages of any sessions and tenures, each tenure's in (seq, sub)
// order. The pack is named by its first message (ConnectionID, Seq, Sub,
// Epoch: on a FIFO queue its group id, and its deduplication id, which also
// names its last, DedupIDRange). A pack of one is the message's own record.
func (s *Sink) Pack(recs []batch.Record) (batch.Record, error) {
	if len(recs) == 0 {
		return batch.Record{}, errors.New("sqs sink: an empty pack")
	}
	first := recs[0]
	if len(recs) == 1 {
		return first, nil
	}
	if err := packorder.Check(recs); err != nil {
		return batch.Record{}, fmt.Errorf("sqs sink: a pack out of order: %w", err)
	}
	size := 0
	for _, r := range recs {
		if s.fifo && (r.ConnectionID != first.ConnectionID || r.Epoch != first.Epoch) {
			return batch.Record{}, fmt.Errorf("sqs sink: a FIFO pack of %s epoch %d holds %s epoch %d", first.ConnectionID, first.Epoch, r.ConnectionID, r.Epoch)
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

// packVersion is the content type of a pack's body: consume.PackV1 when
// every line is an envelope of one session and tenure (the first's),
// consume.PackV2 when they are several. It reads each line's head as
// sink.AppendEnvelope writes it ({"connection_id":"…","seq":…,"lease_epoch":…);
// a line it cannot read so makes the pack version 2, which reads any
// lines.
func packVersion(body []byte) string {
	line, rest, more := bytes.Cut(body, []byte{'\n'})
	if !more {
		return consume.PackV1
	}
	session, ok := envelopeTenure(line)
	for ok && more {
		line, rest, more = bytes.Cut(rest, []byte{'\n'})
		var t []byte
		t, ok = envelopeTenure(line)
		ok = ok && bytes.Equal(t, session)
	}
	if !ok {
		return consume.PackV2
	}
	return consume.PackV1
}

// envelopeTenure is an envelope's head without its seq: the raw
// connection_id and lease_epoch, as sink.AppendEnvelope writes them.
func envelopeTenure(line []byte) ([]byte, bool) {
	const cidKey, epochKey = `{"connection_id":"`, `,"lease_epoch":`
	if !bytes.HasPrefix(line, []byte(cidKey)) {
		return nil, false
	}
	end := len(cidKey)
	for end < len(line) && line[end] != '"' {
		if line[end] == '\\' {
			end++
		}
		end++
	}
	at := bytes.Index(line[end:], []byte(epochKey))
	if end >= len(line) || at < 0 {
		return nil, false
	}
	epoch := end + at + len(epochKey)
	stop := epoch
	for stop < len(line) && (line[stop] == '-' || line[stop] >= '0' && line[stop] <= '9') {
		stop++
	}
	head := make([]byte, 0, end+1+stop-epoch)
	return append(append(append(head, line[:end]...), ','), line[epoch:stop]...), true
}

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
