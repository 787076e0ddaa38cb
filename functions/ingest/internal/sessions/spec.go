package sessions

import (
	"context"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// The configuration lives in a spec item of its own (schema.SpecKey), so
// that the workers' ownership writes, billed on the session item's size,
// stay at 1 write unit: a start puts the spec item of a new configuration
// first, then writes the session naming it (spec_ref), then deletes the
// spec item it superseded. A ref is sessionitem.SpecRef(the generation it
// was first stored at, its content): a later write never stores a ref a
// superseded one had, so the delete cannot remove a configuration in use;
// a reader that finds a ref's item gone re-reads the session, which names
// a newer one. A restart of the same configuration keeps its ref.
//
// What can leak: a spec item whose session write failed its condition is
// deleted once a re-read shows it named by no write to come (a racer of
// the same generation with the same content stores the same ref); one
// whose delete failed (best effort), or that a crash left between the two
// writes, stays, named by nothing and never read, until the session's
// configuration is replaced (only the superseded ref is deleted, not
// strays): at most one item per such failure. Spec items carry no TTL: one
// in use must never expire.

// putSpec stores spec item ref of id. Nothing names it yet, so an error is
// a start that changed nothing the readers see: unavailable (retry) or
// rejected (the item is refused for what it is: over 400 KB).
func (s *Store) putSpec(ctx context.Context, id, ref, stored string) error {
	in, err := sessionitem.PutSpec(s.table, id, ref, stored)
	if err != nil {
		return err
	}
	if _, err := s.api.UpdateItem(ctx, in); err != nil {
		return readFailed("start (spec)", id, err)
	}
	return nil
}

// dropSpec deletes spec item ref of id, best effort: an item left is named
// by nothing and never read.
func (s *Store) dropSpec(ctx context.Context, id, ref string) {
	_, _ = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: sessionitem.Key(schema.SpecKey(id, ref))})
}

// refGeneration is the generation a ref was first stored at.
func refGeneration(ref string) int64 {
	g, _, _ := strings.Cut(ref, ".")
	n, _ := strconv.ParseInt(g, 10, 64)
	return n
}

// specsOf reads the spec items the session items name (those with a ref
// and no inline spec), consistently: stored configuration by connection
// id. A ref whose item is gone (superseded meanwhile) is left out.
func (s *Store) specsOf(ctx context.Context, items []*sessionitem.Item) (map[string]string, error) {
	var keys []map[string]types.AttributeValue
	for _, it := range items {
		if it.Spec == "" && it.SpecRef != "" {
			keys = append(keys, sessionitem.Key(schema.SpecKey(it.ConnectionID, it.SpecRef)))
		}
	}
	out := make(map[string]string, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	raws, err := s.batchRead(ctx, keys)
	if err != nil {
		return nil, err
	}
	for _, raw := range raws {
		sp, err := sessionitem.DecodeSpec(raw)
		if err != nil {
			return nil, err
		}
		rest := strings.TrimPrefix(sp.Key, schema.SpecKeyPrefix)
		id, _, _ := strings.Cut(rest, "#")
		out[id] = sp.Spec
	}
	return out, nil
}
