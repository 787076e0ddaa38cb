// The bill phase's delivery latency: every message a sink request carries,
// taken apart as a consumer would (consume.FromSQS, consume.FromKinesis),
// timed from the worker's read (the envelope's received_at_ms) to the
// request's arrival at the delaying proxy.

package bench

import (
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// Deliveries are the messages a window's sink requests carried.
type Deliveries struct {
	// Records are the SQS messages or Kinesis records read; Envelopes the
	// messages they carried (a pack or an aggregated record carries
	// several); Unread the records whose envelopes could not be read.
	Records   int64
	Envelopes int64
	Unread    int64
	// LatencyMs: per envelope, the request's arrival at the proxy minus
	// its received_at_ms (same machine, same clock).
	LatencyMs []float64
}

func (d *Deliveries) add(x Deliveries) {
	d.Records += x.Records
	d.Envelopes += x.Envelopes
	d.Unread += x.Unread
	d.LatencyMs = append(d.LatencyMs, x.LatencyMs...)
}

// ReadDeliveries takes apart the records of one sink request (SQS JSON
// protocol or Kinesis JSON 1.1, by its X-Amz-Target) that arrived at the
// proxy at arrivedMs (Unix ms); other calls carry none.
func ReadDeliveries(target string, body []byte, arrivedMs int64) (Deliveries, error) {
	var d Deliveries
	take := func(envs []consume.Envelope, err error) {
		d.Records++
		if err != nil {
			d.Unread++
			return
		}
		d.Envelopes += int64(len(envs))
		for _, e := range envs {
			d.LatencyMs = append(d.LatencyMs, float64(arrivedMs-e.ReceivedAtMs))
		}
	}
	req, err := decodeSinkRequest(target, body)
	if err != nil {
		return d, err
	}
	for _, e := range req.entries {
		take(consume.FromSQS(e.MessageBody, e.MessageAttributes[consume.ContentTypeAttribute].StringValue))
	}
	for _, r := range req.records {
		take(consume.FromKinesis(r.Data))
	}
	return d, nil
}

// BillLatency is one run's delivery latency and packing.
type BillLatency struct {
	// Dist of the envelopes' latency (ms), without its samples.
	Dist Dist `json:"latency"`
	// PerRecord: envelopes per wire record (SQS message, Kinesis record),
	// the mean over the window.
	PerRecord float64 `json:"messages_per_record"`
	Records   int64   `json:"records"`
	Envelopes int64   `json:"envelopes"`
	Unread    int64   `json:"unread,omitempty"`
}

// latency summarises d.
func (d Deliveries) latency() BillLatency {
	l := BillLatency{Dist: SummarizeMs(d.LatencyMs), Records: d.Records, Envelopes: d.Envelopes, Unread: d.Unread}
	if d.Records > d.Unread {
		l.PerRecord = float64(d.Envelopes) / float64(d.Records-d.Unread)
	}
	return l
}
