package dynamostore

// Attribute values: building and reading them.

import (
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
)

func v(x any) expression.ValueBuilder { return expression.Value(x) }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func numOf(item map[string]types.AttributeValue, name string) int64 {
	if n, ok := item[name].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		return x
	}
	return 0
}

// with is item (nil: none) with set applied and remove removed: the item an
// update leaves, computed from the item before it.
func with(item map[string]types.AttributeValue, set map[string]types.AttributeValue, remove ...string) map[string]types.AttributeValue {
	out := maps.Clone(item)
	if out == nil {
		out = map[string]types.AttributeValue{}
	}
	maps.Copy(out, set)
	for _, k := range remove {
		delete(out, k)
	}
	return out
}

// seqOf is a stored sequence number (NoSeq: absent).
func seqOf(p *int64) int64 {
	if p == nil {
		return lease.NoSeq
	}
	return *p
}
