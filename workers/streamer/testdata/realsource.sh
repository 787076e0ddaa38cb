#!/bin/bash
# Sources for Debian's websocketd (a WebSocket server we did not write), one
# shape per ?mode= (websocketd passes the query in QUERY_STRING and runs one
# copy per connection; each line printed is one text message, each text
# message received is one line on stdin). Every mode that numbers its
# messages honours ?from=N (start at seq N, as a source that keeps its
# history; 1 without it). Deadlines are the documented ones scaled down so
# that tests are quick (docs/references.md, "Real WebSocket sources"):
#
#   (none)     {"seq":N,"source":"websocketd"} lines.
#   subscribe  Coinbase-style: a {"op":"subscribe","from":"N"} line within
#              1 s (Coinbase: 5 s) or the connection is closed; then an ack
#              {"event":"subscribed"} and {"seq":N..} ("from" empty: 1).
#   okx        OKX-style: the client must send the text "ping" at least every
#              2 s (OKX: 30 s), answered "pong"; data {"arg":..,"seq":N}.
#   keepalive  Zoom RTMS-style: {"msg_type":"KEEP_ALIVE_REQ"} every 0.5 s;
#              a request not answered {"msg_type":"KEEP_ALIVE_RESP"} within
#              1 s closes the connection; media messages carry no seq.
#   nested     Binance-style: the seq at data.u.
#   string     Twilio-style: "sequenceNumber":"N", a string.
#   binary     run with websocketd --binary=true: 4-byte frames, no seq.
#
# The modes that stream seqs (none, nested, string, subscribe) also take:
#
#   rate=N        N messages a second (default: one every 20 ms, about 50/s):
#                 every 20 ms the lines due since the stream started, seqs
#                 contiguous from "from", so 1,000/s is 20 lines a tick.
#   age=SECONDS   exit that long after the connection opened, as Binance
#                 ends a connection after 24 hours; websocketd then closes
#                 the TCP connection, without a close frame (the client
#                 sees 1006). Decimals allowed (age=1.5).
#   notice=SECONDS  with age: that long before exiting, print the line
#                 {"e":"serverShutdown"} once (Binance WebSocket API's
#                 notice; no seq) and go on streaming until the exit.
mode=plain from=1 rate='' age='' notice=''
for kv in $(echo "${QUERY_STRING:-}" | tr '&' ' '); do
  case "$kv" in
    mode=*) mode="${kv#mode=}" ;;
    from=*) from="${kv#from=}" ;;
    rate=*) rate="${kv#rate=}" ;;
    age=*) age="${kv#age=}" ;;
    notice=*) notice="${kv#notice=}" ;;
  esac
done
case "$from" in
  ''|*[!0-9]*) from=1 ;;
esac
case "$rate" in
  ''|0|*[!0-9]*) rate='' ;;
esac
for v in age notice; do
  case "${!v}" in
    ''|.|*[!0-9.]*|*.*.*) printf -v "$v" '' ;;
  esac
done
ms() { echo $(( $(date +%s%N) / 1000000 )); }
# us: microseconds since the epoch, into $now (no fork).
us() { now=${EPOCHREALTIME//[!0-9]/}; }
# to_us SECONDS: the microseconds in a decimal number of seconds.
to_us() {
  local i=${1%%.*} f=''
  case "$1" in *.*) f=${1#*.} ;; esac
  f=${f}000000
  echo $(( 10#${i:-0} * 1000000 + 10#${f:0:6} ))
}
us
opened=$now end_us='' notice_us=''
if [ -n "$age" ]; then
  end_us=$(( opened + $(to_us "$age") ))
  [ -n "$notice" ] && notice_us=$(( end_us - $(to_us "$notice") ))
fi

# recv: the client's next line into $line (status 0) when one is complete
# within 20 ms, else status 1. A read that times out mid-line hands back the
# bytes it took (bash: status > 128, the partial input in the variable);
# they are kept in $partial and completed by the next call. Dropping them
# would lose the line: under load the script can be descheduled between
# the bytes of one line (bash reads a pipe a byte at a time), the timeout
# fires after "p", and "ing" is not a ping.
partial=''
recv() {
  local got rc=0
  IFS= read -r -t 0.02 got || rc=$?
  if [ "$rc" -eq 0 ]; then
    line=$partial$got partial=''
    return 0
  fi
  [ "$rc" -gt 128 ] && partial=$partial$got
  return 1
}

# scheduled: exit at the connection's age, after printing the shutdown
# notice at its time (both only when asked for).
scheduled() {
  [ -n "$end_us" ] || return 0
  us
  [ "$now" -ge "$end_us" ] && exit 0 # max age: websocketd closes the connection
  if [ -n "$notice_us" ] && [ "$now" -ge "$notice_us" ]; then
    echo '{"e":"serverShutdown"}' || exit 0
    notice_us=''
  fi
}

# emit FORMAT: print FORMAT with seq $from, $from+1, … every 20 ms (with
# rate: the lines due at rate, every 20 ms) until the client goes away.
emit() {
  i=$from
  if [ -z "$rate" ]; then
    while :; do
      scheduled
      printf "$1\n" "$i" || exit 0
      i=$((i + 1))
      sleep 0.02
    done
  fi
  local began seqs
  us
  began=$now
  while :; do
    scheduled
    us
    # Seqs due: one at the start, then rate a second; at most 2,000 a
    # batch (a slow reader catches up over several).
    due=$(( from + (now - began) * rate / 1000000 ))
    [ "$due" -gt $(( i + 1999 )) ] && due=$(( i + 1999 ))
    seqs=()
    while [ "$i" -le "$due" ]; do
      seqs+=("$i")
      i=$((i + 1))
    done
    if [ "${#seqs[@]}" -gt 0 ]; then
      printf "$1\n" "${seqs[@]}" || exit 0
    fi
    sleep 0.02
  done
}

case "$mode" in
plain) emit '{"seq":%d,"source":"websocketd"}' ;;
nested) emit '{"stream":"btcusdt@depth","data":{"e":"depthUpdate","u":%d}}' ;;
string) emit '{"event":"media","sequenceNumber":"%d","media":{"payload":"AAAA"}}' ;;
subscribe)
  read -r -t 1 line || exit 0 # no subscribe in time: close
  case "$line" in
    *'"op":"subscribe"'*) ;;
    *) exit 0 ;;
  esac
  f=$(echo "$line" | sed -n 's/.*"from":"\([0-9]*\)".*/\1/p')
  from=${f:-1}
  echo '{"event":"subscribed"}'
  emit '{"seq":%d,"product":"BTC-USD"}'
  ;;
okx)
  i=$from deadline=$(( $(ms) + 2000 ))
  while :; do
    if recv; then
      [ "$line" = ping ] && { echo pong || exit 0; deadline=$(( $(ms) + 2000 )); }
    fi
    [ "$(ms)" -gt "$deadline" ] && exit 0 # no ping in time: close
    printf '{"arg":{"channel":"tickers"},"seq":%d}\n' "$i" || exit 0
    i=$((i + 1))
  done
  ;;
keepalive)
  pending=0 next=$(( $(ms) + 500 ))
  while :; do
    if recv; then
      case "$line" in *KEEP_ALIVE_RESP*) pending=0 ;; esac
    fi
    now=$(ms)
    [ "$pending" -ne 0 ] && [ "$now" -gt $(( pending + 1000 )) ] && exit 0 # unanswered: close
    if [ "$now" -gt "$next" ]; then
      echo '{"msg_type":"KEEP_ALIVE_REQ","timestamp":'"$now"'}' || exit 0
      [ "$pending" -eq 0 ] && pending=$now
      next=$(( now + 500 ))
    fi
    printf '{"msg_type":"MEDIA_DATA_TRANSCRIPT","content":{"ts":%d}}\n' "$now" || exit 0
  done
  ;;
binary)
  while :; do
    printf '\x00\x01\xfe\xff' || exit 0
    sleep 0.05
  done
  ;;
esac
