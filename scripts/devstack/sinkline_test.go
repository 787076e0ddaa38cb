package devstack

import "testing"

// A sink line's DataSeq is its data's "seq" when the data is a JSON object
// with one, else 0, and never fails the line.
func TestSinkLineDataSeq(t *testing.T) {
	for line, want := range map[string]DataSeq{
		`{"connection_id":"a","seq":4294967301,"lease_epoch":2,"worker_id":"w","data":{"seq":46,"session":"a","ts":1}}`: 46,
		`{"connection_id":"a","seq":3,"lease_epoch":1,"worker_id":"w","data":"not json"}`:                               0,
		`{"connection_id":"a","seq":3,"lease_epoch":1,"worker_id":"w","data_b64":"AAE="}`:                               0,
		`{"connection_id":"a","seq":3,"lease_epoch":1,"worker_id":"w","data":{"seq":"7"}}`:                              0,
	} {
		r, err := ParseSinkLine([]byte(line))
		if err != nil || r.DataSeq != want {
			t.Errorf("%s: DataSeq %d, %v; want %d", line, r.DataSeq, err, want)
		}
	}
}
