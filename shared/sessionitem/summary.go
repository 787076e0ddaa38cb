package sessionitem

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Summary is the fleet summary's head (Pk schema.SummaryKey; attribute
// names schema.AttrSum*): advisory counts, receivers and moves one worker
// wrote for the others to read in one small GetItem (lease.Summary).
type Summary struct {
	Key       string        `dynamodbav:"Pk"`
	Version   int64         `dynamodbav:"sum_version"`
	Writer    string        `dynamodbav:"sum_writer"`
	AtMs      int64         `dynamodbav:"sum_at_ms"`
	Alive     int           `dynamodbav:"alive"`
	Load      int           `dynamodbav:"load"`
	Capacity  int           `dynamodbav:"capacity"`
	Imbalance float64       `dynamodbav:"imbalance"`
	Members   int64         `dynamodbav:"members_version"`
	MembersBy string        `dynamodbav:"members_by,omitempty"`
	Pages     int           `dynamodbav:"pages"`
	Peers     []SummaryPeer `dynamodbav:"peers,omitempty"`
	Moves     []SummaryMove `dynamodbav:"moves,omitempty"`
}

// SummaryPeer is one worker a head names (an element of its peers).
type SummaryPeer struct {
	ID       string `dynamodbav:"id"`
	Addr     string `dynamodbav:"addr,omitempty"`
	Load     int    `dynamodbav:"load"`
	Capacity int    `dynamodbav:"capacity"`
}

// SummaryMove is one move of a head's plan (an element of its moves).
type SummaryMove struct {
	From  string `dynamodbav:"from"`
	To    string `dynamodbav:"to"`
	Count int    `dynamodbav:"count"`
}

// MembersPage is one membership page of the fleet summary (Pk
// schema.MembersKey(Page)): the alive worker ids of membership version
// Version, written by Writer.
type MembersPage struct {
	Key     string   `dynamodbav:"Pk"`
	Version int64    `dynamodbav:"sum_version"`
	Writer  string   `dynamodbav:"sum_writer"`
	Page    int      `dynamodbav:"page"`
	IDs     []string `dynamodbav:"members,stringset,omitempty"`
}

// EncodeSummary is the head's attributes.
func EncodeSummary(s Summary) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(s)
	if err != nil {
		return nil, fmt.Errorf("encode fleet summary: %w", err)
	}
	return m, nil
}

// DecodeSummary reads a head.
func DecodeSummary(m map[string]types.AttributeValue) (Summary, error) {
	var s Summary
	if err := attributevalue.UnmarshalMap(m, &s); err != nil {
		return Summary{}, fmt.Errorf("decode fleet summary: %w", err)
	}
	return s, nil
}

// EncodeMembers is a membership page's attributes.
func EncodeMembers(p MembersPage) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(p)
	if err != nil {
		return nil, fmt.Errorf("encode membership page %d: %w", p.Page, err)
	}
	return m, nil
}

// DecodeMembers reads a membership page.
func DecodeMembers(m map[string]types.AttributeValue) (MembersPage, error) {
	var p MembersPage
	if err := attributevalue.UnmarshalMap(m, &p); err != nil {
		return MembersPage{}, fmt.Errorf("decode membership page: %w", err)
	}
	return p, nil
}
