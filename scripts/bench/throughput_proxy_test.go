package bench

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestFirstTSInSinkRequests(t *testing.T) {
	env := `{"connection_id":"dyn-000000","seq":7,"lease_epoch":1,"worker_id":"w","received_at_ms":1700000000999,"data":{"seq":7,"session":"dyn-000000","ts":1700000000123}}`
	// SQS (JSON 1.0): the envelope is a JSON string in MessageBody.
	sqsBody := `{"QueueUrl":"q","Entries":[{"Id":"0","MessageBody":"` + strings.ReplaceAll(env, `"`, `\"`) + `"},{"Id":"1","MessageBody":"{\"data\":{\"ts\":1}}"}]}`
	// Kinesis (JSON 1.1): base64 data; a JSON encoder may escape '/'.
	data := base64.StdEncoding.EncodeToString([]byte(env + "\xff\xfe?>"))
	kinBody := `{"Records":[{"Data":"` + strings.ReplaceAll(data, "/", `\/`) + `","PartitionKey":"dyn-000000"}],"StreamName":"s"}`
	for name, body := range map[string]string{"sqs": sqsBody, "kinesis": kinBody} {
		if ts, ok := firstTS([]byte(body)); !ok || ts != 1700000000123 {
			t.Errorf("%s: ts %d, %v", name, ts, ok)
		}
	}
	if _, ok := firstTS([]byte(`{"Entries":[]}`)); ok {
		t.Error("a ts in a body without one")
	}
}
