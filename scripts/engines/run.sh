#!/usr/bin/env bash
# Runs the local AWS engines in the foreground for humans: dynalite (DynamoDB)
# and fauxqs (SQS), bound to 127.0.0.1, and prints the variables that point the
# AWS SDK (and the aws CLI) at them. Ctrl-C stops both.
#   scripts/engines/run.sh [DYNAMO_PORT] [SQS_PORT] [DATA_DIR]
# DATA_DIR keeps DynamoDB on disk; without it the data lives in memory.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dport="${1:-8000}"; qport="${2:-9324}"; data="${3:-}"
[ -x "$root/node_modules/.bin/dynalite" ] || (cd "$root" && npm ci --no-audit --no-fund --loglevel=error)
args=("$dport")
[ -n "$data" ] && mkdir -p "$data" && args+=("$data")
node "$root/scripts/engines/dynalite.mjs" "${args[@]}" & dpid=$!
node "$root/scripts/engines/fauxqs.mjs" "$qport" & qpid=$!
trap 'kill $dpid $qpid 2>/dev/null; wait' INT TERM EXIT
for p in "$dport" "$qport"; do
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$p") 2>/dev/null && break; sleep 0.1; done
done
cat <<MSG
engines up. In another shell:
  export AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$dport
  export AWS_ENDPOINT_URL_SQS=http://127.0.0.1:$qport
  export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
Ctrl-C stops them.
MSG
wait
