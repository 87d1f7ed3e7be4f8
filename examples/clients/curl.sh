#!/usr/bin/env bash
# Asks Sluice's HTTP API with curl (and jq to read the answers): a check, a denial with its
# headers, a batch, a lease released, and an error code. Runs against
# `sluice serve --config examples/clients/sluice.yaml`:
#
#   examples/clients/curl.sh http://127.0.0.1:8080
#
# Exits non-zero if an answer is not the one the rules give.
set -euo pipefail
base=${1:-http://127.0.0.1:8080}
ip="203.0.113.$((RANDOM % 250))"

post() { curl -sS -X POST "$base$1" -H 'content-type: application/json' -d "$2"; }
status() { curl -sS -o /dev/null -w '%{http_code}' -X POST "$base$1" -H 'content-type: application/json' -d "$2"; }
fail() { echo "curl.sh: $*" >&2; exit 1; }

for _ in 1 2 3 4 5; do
  [ "$(status /v1/check "{\"rule\":\"login\",\"attributes\":{\"ip\":\"$ip\"}}")" = 200 ] || fail "an attempt within the limit was denied"
done
# The sixth is denied: 429, with RateLimit and Retry-After headers, and the decision in the body.
headers=$(curl -sS -D - -o /dev/null -X POST "$base/v1/check?view=headers" -d "{\"rule\":\"login\",\"attributes\":{\"ip\":\"$ip\"}}")
echo "$headers" | grep -q '^HTTP/1.1 429' || fail "the sixth attempt was not denied: $headers"
echo "$headers" | grep -qi '^retry-after: ' || fail "no Retry-After: $headers"

# A batch: all or nothing, one decision per part.
tenant="t-$RANDOM$RANDOM"
answer=$(post /v1/check-all "{\"checks\":[{\"rule\":\"api\",\"attributes\":{\"user\":\"u1\"},\"cost\":2},{\"rule\":\"jobs\",\"attributes\":{\"tenant\":\"$tenant\"}}]}")
[ "$(jq -r .allowed <<<"$answer")" = true ] || fail "the batch was denied: $answer"
lease=$(jq -r '.decisions[1].lease' <<<"$answer")
[ "$(post /v1/release "{\"lease\":\"$lease\"}" | jq -r .released)" = true ] || fail "the lease was not released"

# Errors carry a stable code.
code=$(post /v1/check '{"rule":"no_such_rule","attributes":{}}' | jq -r .error.code)
[ "$code" = unknown_rule ] || fail "expected unknown_rule, got $code"
echo "curl.sh: ok"
