#!/bin/sh
# A sequence-numbered source for Debian's websocketd (a WebSocket server we did
# not write): websocketd runs one copy per connection and sends each line it
# prints as one text message. It honours ?from=N (passed by websocketd in
# QUERY_STRING) by starting at seq N, like a source that keeps its history, and
# starts at 1 without it.
#
#   websocketd --address=127.0.0.1 --port=PORT --maxforks=1 testdata/seqsource.sh
from=1
for kv in $(echo "${QUERY_STRING:-}" | tr '&' ' '); do
  case "$kv" in
    from=*) from="${kv#from=}" ;;
  esac
done
case "$from" in
  ''|*[!0-9]*) from=1 ;;
esac
i=$from
while :; do
  printf '{"seq":%d,"source":"websocketd"}\n' "$i" || exit 0
  i=$((i + 1))
  sleep 0.02
done
