package sessions

// The reads: one session, a page of the list, the consistent batch reads
// behind both and the spec items they name.

import (
	"context"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// Get reads one session (and its spec item) with consistent reads.
func (s *Store) Get(ctx context.Context, id string) (Session, error) {
	got, err := s.batchGet(ctx, []string{id})
	if err != nil {
		return Session{}, fmt.Errorf("get %s: %w", id, err)
	}
	sess, ok := got[id]
	if !ok {
		return Session{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return sess, nil
}

// getItem reads id's item consistently; nil when there is none.
func (s *Store) getItem(ctx context.Context, id string) (*sessionitem.Item, error) {
	it, err := sessionitem.Get(ctx, s.api, s.table, id)
	if err != nil {
		return nil, readFailed("read", id, err)
	}
	return it, nil
}

// MaxListLimit is the largest page List returns.
const MaxListLimit = 100

// List returns up to limit sessions whose desired state is state, starting
// after cursor (empty for the first page). It reads the by_state index
// shard by shard (within a shard, by connection id), so the order is stable
// across pages but not global. The index is eventually consistent: items
// are re-read consistently and those no longer
// in state are left out, so a page may hold fewer than limit sessions while
// Next is set.
func (s *Store) List(ctx context.Context, state string, limit int, cursor string) (Page, error) {
	if state != schema.StateStarted && state != schema.StateStopped {
		return Page{}, fmt.Errorf("list: state %q is neither %s nor %s", state, schema.StateStarted, schema.StateStopped)
	}
	if limit <= 0 || limit > MaxListLimit {
		limit = MaxListLimit
	}
	shard := 0
	var start map[string]types.AttributeValue
	if cursor != "" {
		var err error
		if shard, start, err = decodeCursor(cursor, state); err != nil {
			return Page{}, fmt.Errorf("list %s: %w", state, err)
		}
	}
	var page Page
	ids := make([]string, 0, limit)
	for shard < schema.IndexShards && len(ids) < limit {
		in, err := sessionitem.StateQuery(s.table, schema.IndexShardKey(state, shard), int32(limit-len(ids)), start)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", state, err)
		}
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return Page{}, readFailed("list", state, err)
		}
		for _, raw := range out.Items {
			it, err := sessionitem.Decode(raw)
			if err != nil {
				return Page{}, fmt.Errorf("list %s: %w", state, err)
			}
			ids = append(ids, it.ConnectionID)
		}
		if len(out.LastEvaluatedKey) > 0 {
			start = out.LastEvaluatedKey
			continue
		}
		shard, start = shard+1, nil
	}
	if shard < schema.IndexShards {
		next, err := encodeCursor(state, shard, start)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", state, err)
		}
		page.Next = next
	}
	got, err := s.batchGet(ctx, ids)
	if err != nil {
		return Page{}, fmt.Errorf("list %s: %w", state, err)
	}
	for _, id := range ids {
		sess, ok := got[id]
		if !ok || sess.DesiredState != state {
			continue
		}
		page.Sessions = append(page.Sessions, sess)
	}
	return page, nil
}

// resumeSeq is the larger of two optional sequence numbers (lease.ResumeSeq).
func resumeSeq(a, b *int64) *int64 {
	if a == nil || (b != nil && *b > *a) {
		return b
	}
	return a
}

// batchKeys is how many keys one BatchGetItem request may carry.
const batchKeys = 100

// batchGet reads the session items of ids consistently, retrying
// unprocessed keys, then the spec items they name. A session's last_seq is
// the larger of its checkpoint (last_seq) and the release_seq its last
// release wrote (nil when neither is set).
func (s *Store) batchGet(ctx context.Context, ids []string) (map[string]Session, error) {
	return s.batchGetDepth(ctx, ids, 0)
}

// specRereads bounds the re-reads of sessions whose spec item was
// superseded between the session's read and the spec's.
const specRereads = 3

func (s *Store) batchGetDepth(ctx context.Context, ids []string, depth int) (map[string]Session, error) {
	keys := make([]map[string]types.AttributeValue, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, sessionitem.Key(id))
	}
	raws, err := s.batchRead(ctx, keys)
	if err != nil {
		return nil, err
	}
	got := make(map[string]Session, len(ids))
	var items []*sessionitem.Item
	for _, raw := range raws {
		if pk, _ := raw[schema.AttrPk].(*types.AttributeValueMemberS); pk == nil {
			continue
		}
		it, err := sessionitem.Decode(raw)
		if err != nil {
			return nil, fmt.Errorf("batch read: %w", err)
		}
		items = append(items, &it)
	}
	specs, err := s.specsOf(ctx, items)
	if err != nil {
		return nil, err
	}
	var superseded []string
	for _, it := range items {
		stored, ok := it.Spec, true
		if stored == "" && it.SpecRef != "" {
			stored, ok = specs[it.ConnectionID]
		}
		if !ok {
			superseded = append(superseded, it.ConnectionID)
			continue
		}
		got[it.ConnectionID] = toSession(it, stored)
	}
	if len(superseded) > 0 {
		// A start replaced their configuration between the two reads: the
		// sessions name newer spec items.
		if depth >= specRereads {
			return nil, fmt.Errorf("%w: batch read: configurations replaced %d times while read", ErrConflict, depth)
		}
		again, err := s.batchGetDepth(ctx, superseded, depth+1)
		if err != nil {
			return nil, err
		}
		maps.Copy(got, again)
	}
	return got, nil
}

// batchRead reads keys consistently, batchKeys at a time, retrying
// unprocessed keys up to maxAttempts times per batch.
func (s *Store) batchRead(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for len(keys) > 0 {
		n := min(batchKeys, len(keys))
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys[:n], ConsistentRead: aws.Bool(true)}}
		keys = keys[n:]
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt >= s.maxAttempts {
				return nil, fmt.Errorf("%w: batch read: unprocessed keys after %d attempts", ErrUnavailable, attempt)
			}
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return nil, fmt.Errorf("%w: batch read: %v", ErrUnavailable, err)
				}
			}
			out, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, readFailed("batch read", s.table, err)
			}
			items = append(items, out.Responses[s.table]...)
			req = out.UnprocessedKeys
		}
	}
	return items, nil
}
