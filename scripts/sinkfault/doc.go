// Package sinkfault is the chaos harness's sink fault proxy: an HTTP proxy
// between the workers and the destination engine of their batched sink
// (fauxqs for the sqs sink, kinesalite for the kinesis sink; both speak the
// AWS JSON protocol over plain HTTP locally). On the sink's own calls
// (SendMessageBatch / SendMessage naming the output queue, PutRecords) it
// can add latency spikes (a request held before it is forwarded, or its
// answer held after the destination stored it), refuse a share of the
// entries (transient or permanent: refused entries are removed from the
// request before it is forwarded, so they are not stored, and the answer
// names them as failed), and freeze the sink (every sink request held until
// thawed, connections open, as testkit/faultnet does at the TCP level).
//
// Every other request is forwarded untouched: with the sqs sink the worker
// has one SQS endpoint for its work queue and its output queue, so the proxy
// routes by the QueueUrl (or QueueName) of the JSON body: the output queue's
// requests go to the destination engine, everything else to the work
// queue's engine (killed by the sqs-down fault; the destination is a second
// engine and keeps its messages).
//
// It records, for every entry the destination accepted, the time the proxy
// received the destination's successful answer (Stamps): the moment the
// record was known stored, on the harness's clock. A held request is
// forwarded only while its client still waits for it (a request the worker
// cancelled at its timeout or its trust deadline never reaches the
// destination), as a request that never left a host would.
//
// It listens on 127.0.0.1 only; no shipped binary imports it.
//
// Files, by concern:
//
//   - sinkfault.go: Config, Start and Close, the routing of a request;
//   - faults.go: the faults (Latency, Refuse, Freeze) and their draws and
//     holds;
//   - sqs.go, kinesis.go: the sink's calls of each protocol;
//   - wire.go: the exchanges with the engines and the proxy's own error
//     answers;
//   - keys.go: the record keys of the envelopes a request carries;
//   - stats.go: the counters and the stamps.
package sinkfault
