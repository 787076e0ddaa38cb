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
mode=plain from=1
for kv in $(echo "${QUERY_STRING:-}" | tr '&' ' '); do
  case "$kv" in
    mode=*) mode="${kv#mode=}" ;;
    from=*) from="${kv#from=}" ;;
  esac
done
case "$from" in
  ''|*[!0-9]*) from=1 ;;
esac
ms() { echo $(( $(date +%s%N) / 1000000 )); }

# emit FORMAT: print FORMAT with seq $from, $from+1, … every 20 ms until the
# client goes away.
emit() {
  i=$from
  while :; do
    printf "$1\n" "$i" || exit 0
    i=$((i + 1))
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
    if read -r -t 0.02 line; then
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
    if read -r -t 0.02 line; then
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
