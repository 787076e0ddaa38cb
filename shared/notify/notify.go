// Package notify owns the work-queue notification: its wire format and the
// small interfaces that publish and consume it. Notifications are hints; the
// table is the truth, so a lost notification only delays a claim until the
// next reconciliation.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Notification is the body of a work-queue message.
type Notification struct {
	Type         string `json:"type"` // schema.NotifyStart | schema.NotifyStop
	ConnectionID string `json:"connection_id"`
	Generation   int64  `json:"generation"`
	SentAtMs     int64  `json:"sent_at_ms"`
	// PrevOwner and PrevEpoch (a start only, both or neither) name the
	// tenure the announcer found the session in: a dead or departed
	// owner's, announced by its takeover or by the leaver itself. A
	// consumer that reads that owner's record as not alive itself names
	// the tenure in its acquire: one conditional write, where an acquire
	// that found the session held was refused first and sent again.
	// Older workers ignore the fields.
	PrevOwner string `json:"prev_owner,omitempty"`
	PrevEpoch int64  `json:"prev_epoch,omitempty"`
}

// ConnectionIDPattern is the character set and length of a connection_id;
// ValidConnectionID is the whole grammar.
var ConnectionIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidConnectionID reports whether id is a connection_id: 1 to 128 of
// A-Z a-z 0-9 . _ : -, and not "." or ".." (HTTP clients normalise those
// path segments away, so such a session could never be addressed).
func ValidConnectionID(id string) bool {
	return id != "." && id != ".." && ConnectionIDPattern.MatchString(id)
}

// ErrMalformed marks a message body that is not a valid notification.
var ErrMalformed = errors.New("malformed notification")

// Encode returns the JSON body of n.
func Encode(n Notification) (string, error) {
	if err := n.Validate(); err != nil {
		return "", err
	}
	b, err := json.Marshal(n)
	if err != nil {
		return "", fmt.Errorf("encode notification %s: %w", n.ConnectionID, err)
	}
	return string(b), nil
}

// Decode parses and validates a message body.
func Decode(body string) (Notification, error) {
	var n Notification
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return Notification{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := n.Validate(); err != nil {
		return Notification{}, err
	}
	return n, nil
}

// Validate checks the type and the connection id.
func (n Notification) Validate() error {
	if n.Type != schema.NotifyStart && n.Type != schema.NotifyStop {
		return fmt.Errorf("%w: type %q", ErrMalformed, n.Type)
	}
	if !ValidConnectionID(n.ConnectionID) {
		return fmt.Errorf("%w: connection_id %q", ErrMalformed, n.ConnectionID)
	}
	if (n.PrevOwner == "") != (n.PrevEpoch == 0) || n.PrevEpoch < 0 || (n.PrevOwner != "" && n.Type != schema.NotifyStart) {
		return fmt.Errorf("%w: prev_owner %q and prev_epoch %d (a start's, both or neither, epoch positive)", ErrMalformed, n.PrevOwner, n.PrevEpoch)
	}
	return nil
}

// Publisher sends notifications.
type Publisher interface {
	Publish(ctx context.Context, n Notification) error
}

// MaxBatch is the most notifications a BatchPublisher must accept in one
// call (SQS's limit on a batch request).
const MaxBatch = 10

// BatchPublisher sends up to MaxBatch notifications in one request;
// errs[i] is the outcome of ns[i]. Coalescer batches concurrent Publish
// calls on it.
type BatchPublisher interface {
	PublishBatch(ctx context.Context, ns []Notification) (errs []error)
}

// Message is one received notification with its queue handle. Err is set,
// and Notification zero, when the body did not decode: the consumer logs it
// and deletes it (it can never succeed) or leaves it for the dead-letter queue.
type Message struct {
	Notification Notification
	Receipt      string
	MessageID    string
	Body         string
	ReceiveCount int
	Err          error
}

// Consumer receives notifications.
type Consumer interface {
	// Receive long-polls for up to max messages.
	Receive(ctx context.Context, max int) ([]Message, error)
	// Delete acknowledges handled messages (in batches where the queue
	// has them); the error names every message not deleted.
	Delete(ctx context.Context, ms ...Message) error
	// Requeue makes a message visible again after after (0: at once), for
	// another worker.
	Requeue(ctx context.Context, m Message, after time.Duration) error
}
