#!/usr/bin/env bash
# A quick capacity check of one worker (docs/worker.md#capacity): the worker on
# the in-memory store (bin/memstreamer, bench only) with the discard sink, N sessions on bin/feed (testkit/feed) in its
# own process on loopback at 1 message/s each. Prints RSS, CPU and the message
# rate in steady state, and how long the graceful shutdown took.
#
#   make bench-bin
#   workers/streamer/tools/capacity.sh 2000 8000        # GOGC=50 (the binary's default)
#   GOGC=100 workers/streamer/tools/capacity.sh 2000 8000
#
# The full benchmark (19,000 sessions, several loopback addresses, profiles)
# is `make bench`.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
feed_port=${FEED_PORT:-18790}
admin=${ADMIN_ADDR:-127.0.0.1:18801}
status() { curl -s "http://$admin/status"; }
sum() { python3 -c "import json,sys; d=json.load(sys.stdin); print(sum($1 for s in d['sessions']))"; }

"$root/bin/feed" -addr 127.0.0.1 -port "$feed_port" -rate 1 >/dev/null 2>&1 &
feed=$!
trap 'kill "$feed" 2>/dev/null || true' EXIT
sleep 0.5

for n in "$@"; do
  WSFLEET_SINK=discard WSFLEET_ALLOW_PRIVATE_IPS=loopback WSFLEET_ADMIN_ADDR=$admin WSFLEET_CLAIMS_PER_SECOND=5000 WSFLEET_MAX_SESSIONS=30000 \
  WSFLEET_RECONCILE_EVERY=1s WSFLEET_LOG_LEVEL=warn WSFLEET_METRICS_EVERY=1h \
    "$root/bin/memstreamer" -sessions "$n" \
      -urls "ws://127.0.0.1:$feed_port/feed/{id}" -resume-param from >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do
    [ "$(status 2>/dev/null | sum '1 if s["connected"] else 0' 2>/dev/null || echo 0)" = "$n" ] && break
    sleep 1
  done
  sleep 10
  hz=$(getconf CLK_TCK)
  c0=$(awk '{print $14+$15}' "/proc/$pid/stat"); t0=$(date +%s.%N); m0=$(status | sum 's["messages"]')
  sleep 20
  c1=$(awk '{print $14+$15}' "/proc/$pid/stat"); t1=$(date +%s.%N); m1=$(status | sum 's["messages"]')
  rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  k0=$(date +%s.%N); kill -TERM "$pid"; wait "$pid" || true; k1=$(date +%s.%N)
  python3 - <<PY
cpu = ($c1 - $c0) / $hz / ($t1 - $t0) * 100
rate = ($m1 - $m0) / ($t1 - $t0)
print(f"GOGC=${GOGC:-50} sessions=$n rss_mib={$rss/1024:.0f} cpu_pct_of_core={cpu:.1f} msgs_per_s={rate:.0f} "
      f"cpu_pct_per_1k_msgs_s={cpu / max(rate / 1000, 0.001):.2f} shutdown_s={$k1 - $k0:.2f}")
PY
done
