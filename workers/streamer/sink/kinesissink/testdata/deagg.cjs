// Takes Kinesis records apart with aws-kinesis-agg (the reference Node.js
// deaggregator), for TestAggregatedRecordsReadByAwsKinesisAgg.
// argv[2]: the repository root (its node_modules holds the module).
// stdin: a JSON array of {partitionKey, sequenceNumber, data (base64)}.
// stdout: a JSON array of the user records, in order:
// {partitionKey, explicitHashKey (the user record's, or the Kinesis
// record's: absent for a plain record read back), subSequenceNumber, data
// (base64)}. Exits 1 on any error.
"use strict";
const path = require("path");
const agg = require(path.join(process.argv[2], "node_modules", "aws-kinesis-agg"));

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const out = [];
  for (const rec of JSON.parse(input)) {
    agg.deaggregateSync(rec, true, (err, users) => {
      if (err) {
        process.stderr.write(`deaggregate ${rec.sequenceNumber}: ${err}\n`);
        process.exit(1);
      }
      for (const u of users) {
        out.push({ partitionKey: u.partitionKey, explicitHashKey: u.explicitPartitionKey, subSequenceNumber: u.subSequenceNumber, data: u.data });
      }
    });
  }
  process.stdout.write(JSON.stringify(out));
});
