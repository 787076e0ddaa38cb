package kpl_test

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

// formatFile is aggregation-format.md's .proto (proto2) as a descriptor.
func formatFile(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	req := descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	u64 := descriptorpb.FieldDescriptorProto_TYPE_UINT64.Enum()
	byt := descriptorpb.FieldDescriptorProto_TYPE_BYTES.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	field := func(name string, num int32, label *descriptorpb.FieldDescriptorProto_Label, typ *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label, Type: typ}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("kpl_aggregation.proto"),
		Package: proto.String("kpl"),
		Syntax:  proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("AggregatedRecord"), Field: []*descriptorpb.FieldDescriptorProto{
				field("partition_key_table", 1, rep, str, ""),
				field("explicit_hash_key_table", 2, rep, str, ""),
				field("records", 3, rep, msg, ".kpl.Record"),
			}},
			{Name: proto.String("Tag"), Field: []*descriptorpb.FieldDescriptorProto{
				field("key", 1, req, str, ""),
				field("value", 2, opt, str, ""),
			}},
			{Name: proto.String("Record"), Field: []*descriptorpb.FieldDescriptorProto{
				field("partition_key_index", 1, req, u64, ""),
				field("explicit_hash_key_index", 2, opt, u64, ""),
				field("data", 3, req, byt, ""),
				field("tags", 4, rep, msg, ".kpl.Tag"),
			}},
		},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// userRecord is one Record of the format.
type userRecord struct {
	keyIndex  uint64
	hashIndex *uint64
	data      []byte
	tags      [][2]string
}

// marshal is proto.Marshal of the AggregatedRecord built with dynamicpb.
func marshal(t *testing.T, keys, hashKeys []string, recs []userRecord) []byte {
	t.Helper()
	file := formatFile(t)
	aggD := file.Messages().ByName("AggregatedRecord")
	recD := file.Messages().ByName("Record")
	tagD := file.Messages().ByName("Tag")
	agg := dynamicpb.NewMessage(aggD)
	keyList := agg.Mutable(aggD.Fields().ByName("partition_key_table")).List()
	for _, k := range keys {
		keyList.Append(protoreflect.ValueOfString(k))
	}
	hashList := agg.Mutable(aggD.Fields().ByName("explicit_hash_key_table")).List()
	for _, k := range hashKeys {
		hashList.Append(protoreflect.ValueOfString(k))
	}
	list := agg.Mutable(aggD.Fields().ByName("records")).List()
	for _, r := range recs {
		m := dynamicpb.NewMessage(recD)
		m.Set(recD.Fields().ByName("partition_key_index"), protoreflect.ValueOfUint64(r.keyIndex))
		if r.hashIndex != nil {
			m.Set(recD.Fields().ByName("explicit_hash_key_index"), protoreflect.ValueOfUint64(*r.hashIndex))
		}
		m.Set(recD.Fields().ByName("data"), protoreflect.ValueOfBytes(r.data))
		tags := m.Mutable(recD.Fields().ByName("tags")).List()
		for _, kv := range r.tags {
			tag := dynamicpb.NewMessage(tagD)
			tag.Set(tagD.Fields().ByName("key"), protoreflect.ValueOfString(kv[0]))
			tag.Set(tagD.Fields().ByName("value"), protoreflect.ValueOfString(kv[1]))
			tags.Append(protoreflect.ValueOfMessage(tag))
		}
		list.Append(protoreflect.ValueOfMessage(m))
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(agg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// frame is magic | msg | MD5(msg).
func frame(msg []byte) []byte {
	sum := md5.Sum(msg)
	return append(append(append([]byte(nil), kpl.Magic...), msg...), sum[:]...)
}

func sample() [][]byte {
	return [][]byte{[]byte(`{"seq":1}`), {}, bytes.Repeat([]byte("x"), 300), []byte(`{"seq":4,"data":"é"}`)}
}

func TestAggregateIsTheFormatsProtobufFramed(t *testing.T) {
	data := sample()
	got := kpl.Aggregate("conn-1", data)
	var recs []userRecord
	for _, d := range data {
		recs = append(recs, userRecord{data: d})
	}
	want := frame(marshal(t, []string{"conn-1"}, nil, recs))
	if !bytes.Equal(got, want) {
		t.Fatalf("Aggregate:\n%x\nwant proto.Marshal framed:\n%x", got, want)
	}
	size := kpl.EmptySize("conn-1")
	for _, d := range data {
		size += kpl.RecordSize(len(d))
	}
	if size != len(got) {
		t.Fatalf("EmptySize + RecordSizes = %d, want the record's %d bytes", size, len(got))
	}
}

func TestDeaggregateReadsWhatAggregateWrites(t *testing.T) {
	data := sample()
	got, err := kpl.Deaggregate(kpl.Aggregate("k", data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(data) {
		t.Fatalf("%d records, want %d", len(got), len(data))
	}
	for i := range data {
		if !bytes.Equal(got[i], data[i]) {
			t.Fatalf("record %d = %q, want %q", i, got[i], data[i])
		}
	}
}

func TestDeaggregateReadsEveryTableAndSkipsTags(t *testing.T) {
	one := uint64(1)
	msg := marshal(t, []string{"a", "b"}, []string{"123", "456"}, []userRecord{
		{keyIndex: 1, hashIndex: &one, data: []byte("first"), tags: [][2]string{{"k", "v"}}},
		{keyIndex: 0, data: []byte("second")},
	})
	got, err := kpl.Deaggregate(frame(msg))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != "first" || string(got[1]) != "second" {
		t.Fatalf("got %q, want [first second]", got)
	}
}

// Several sessions under one explicit hash key (the kinesis sink's hash
// buckets): the tables list each key once, in the order they first appear,
// every record carries both indexes; GroupEmptySize and
// GroupRecordMaxSize bound the record's size; Users reads the keys back.
func TestAggregateUsersIsTheFormatsProtobufFramed(t *testing.T) {
	const ehk = "170141183460469231731687303715884105728"
	users := []kpl.User{
		{PartitionKey: "conn-a", ExplicitHashKey: ehk, Data: []byte(`{"seq":1}`)},
		{PartitionKey: "conn-b", ExplicitHashKey: ehk, Data: []byte{}},
		{PartitionKey: "conn-a", ExplicitHashKey: ehk, Data: bytes.Repeat([]byte("x"), 300)},
		{PartitionKey: "conn-c", ExplicitHashKey: ehk, Data: []byte(`{"seq":4}`)},
	}
	got := kpl.AggregateUsers(users)
	zero := uint64(0)
	want := frame(marshal(t, []string{"conn-a", "conn-b", "conn-c"}, []string{ehk}, []userRecord{
		{keyIndex: 0, hashIndex: &zero, data: users[0].Data},
		{keyIndex: 1, hashIndex: &zero, data: users[1].Data},
		{keyIndex: 0, hashIndex: &zero, data: users[2].Data},
		{keyIndex: 2, hashIndex: &zero, data: users[3].Data},
	}))
	if !bytes.Equal(got, want) {
		t.Fatalf("AggregateUsers:\n%x\nwant proto.Marshal framed:\n%x", got, want)
	}
	bound := kpl.GroupEmptySize(ehk)
	for i, u := range users {
		bound += kpl.GroupRecordMaxSize(u.PartitionKey, len(u.Data), i+1)
	}
	if bound < len(got) || bound > len(got)+2*(len("conn-a")+2) {
		t.Fatalf("bound %d for a record of %d bytes: want at least its size, over it by no more than the repeated key", bound, len(got))
	}
	back, err := kpl.Users(got)
	if err != nil {
		t.Fatal(err)
	}
	for i := range users {
		if back[i].PartitionKey != users[i].PartitionKey || back[i].ExplicitHashKey != ehk || !bytes.Equal(back[i].Data, users[i].Data) {
			t.Fatalf("user record %d = %+v, want %+v", i, back[i], users[i])
		}
	}
	plain, err := kpl.Users([]byte("plain"))
	if err != nil || len(plain) != 1 || string(plain[0].Data) != "plain" || plain[0].PartitionKey != "" || plain[0].ExplicitHashKey != "" {
		t.Fatalf("a plain record: %+v, %v: want its data, no keys", plain, err)
	}
}

func TestPlainRecordIsItsOwnUserRecord(t *testing.T) {
	for _, plain := range [][]byte{[]byte(`{"seq":1}`), {}, kpl.Magic} {
		got, err := kpl.Deaggregate(plain)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0], plain) {
			t.Fatalf("Deaggregate(%q) = %q, %v: want the record itself", plain, got, err)
		}
	}
}

func TestBadChecksumOrProtobufIsAnError(t *testing.T) {
	agg := kpl.Aggregate("k", sample())
	agg[len(agg)-1] ^= 1
	if _, err := kpl.Deaggregate(agg); !errors.Is(err, kpl.ErrChecksum) {
		t.Fatalf("bad MD5: %v, want ErrChecksum", err)
	}
	bad := map[string][]byte{
		"truncated":           kpl.Aggregate("k", sample())[len(kpl.Magic) : len(kpl.Magic)+20],
		"records as a varint": {0x18, 0x01},
		"key index past the table": marshal(t, []string{"a"}, nil, []userRecord{
			{keyIndex: 1, data: []byte("x")},
		}),
		"record without data": {0x1a, 0x02, 0x08, 0x00},
		"hash key index past the table": marshal(t, []string{"a"}, []string{"1"}, []userRecord{
			{keyIndex: 0, hashIndex: new(uint64(1)), data: []byte("x")},
		}),
	}
	for name, msg := range bad {
		_, err := kpl.Deaggregate(frame(msg))
		if err == nil || errors.Is(err, kpl.ErrChecksum) || !strings.HasPrefix(err.Error(), "kpl: ") {
			t.Errorf("%s: %v, want a format error", name, err)
		}
	}
}

func ExampleDeaggregate() {
	rec := kpl.Aggregate("conn-1", [][]byte{[]byte("a"), []byte("b")})
	data, err := kpl.Deaggregate(rec)
	fmt.Printf("%q %v\n", data, err)
	// Output: ["a" "b"] <nil>
}
