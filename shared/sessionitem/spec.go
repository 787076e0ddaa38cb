package sessionitem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// SpecItem is a session's spec item (Pk schema.SpecKey): one stored
// configuration, written once by ingest and never updated.
type SpecItem struct {
	Key  string `dynamodbav:"Pk"`
	Spec string `dynamodbav:"spec"`
}

// SpecRef is the ref of configuration stored (shared/spec's stored form)
// first stored at generation gen: "<gen>.<16 hex digits of its SHA-256>".
// The generation makes a ref unique per session write (generations only
// grow), so deleting a superseded ref never deletes one a later write
// stores; the hash tells ingest whether a start changes the configuration
// without reading the spec item, and makes the two racing starts of one
// generation with different configurations write different items.
func SpecRef(gen int64, stored string) string {
	return strconv.FormatInt(gen, 10) + "." + SpecHash(stored)
}

// SpecHash is the content part of a ref of stored.
func SpecHash(stored string) string {
	h := sha256.Sum256([]byte(stored))
	return hex.EncodeToString(h[:8])
}

// HashOfRef is the content part of ref ("" when it has none).
func HashOfRef(ref string) string {
	_, h, _ := strings.Cut(ref, ".")
	return h
}

// SpecHashOf is the content hash of the item's configuration: of its
// inline spec (an item an older ingest wrote: a ref beside it is older,
// since only an older ingest writes spec inline, and leaves spec_ref as it
// was), or from its ref.
func SpecHashOf(it Item) string {
	if it.Spec != "" || it.SpecRef == "" {
		return SpecHash(it.Spec)
	}
	return HashOfRef(it.SpecRef)
}

// EncodeSpec is spec item ref of connection id holding stored.
func EncodeSpec(id, ref, stored string) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(SpecItem{Key: schema.SpecKey(id, ref), Spec: stored})
	if err != nil {
		return nil, fmt.Errorf("encode spec item of %s: %w", id, err)
	}
	return m, nil
}

// DecodeSpec reads a spec item.
func DecodeSpec(m map[string]types.AttributeValue) (SpecItem, error) {
	var s SpecItem
	if err := attributevalue.UnmarshalMap(m, &s); err != nil {
		return SpecItem{}, fmt.Errorf("decode spec item: %w", err)
	}
	return s, nil
}

// GetSpec reads spec item ref of connection id consistently: its spec, and
// whether it exists (a superseded one ingest deleted does not: re-read the
// session, which names a newer one).
func GetSpec(ctx context.Context, api Getter, table, id, ref string) (string, bool, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: Key(schema.SpecKey(id, ref)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", false, fmt.Errorf("get spec %s of %s: %w", ref, id, err)
	}
	if len(out.Item) == 0 {
		return "", false, nil
	}
	s, err := DecodeSpec(out.Item)
	if err != nil {
		return "", false, fmt.Errorf("get spec %s of %s: %w", ref, id, err)
	}
	return s.Spec, true, nil
}

// PutSpec is the write that stores spec item ref of connection id holding
// stored: an UpdateItem, which creates the item (ingest creates every item
// it writes with UpdateItem: its grants have no PutItem). A ref names one
// content, so writing it again changes nothing.
func PutSpec(table, id, ref, stored string) (*dynamodb.UpdateItemInput, error) {
	e, err := expression.NewBuilder().WithUpdate(expression.Set(Spec, expression.Value(stored))).Build()
	if err != nil {
		return nil, fmt.Errorf("build spec write of %s: %w", id, err)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 &table,
		Key:                       Key(schema.SpecKey(id, ref)),
		UpdateExpression:          e.Update(),
		ExpressionAttributeNames:  e.Names(),
		ExpressionAttributeValues: e.Values(),
	}, nil
}
