#!/usr/bin/env bash
# agent-authz walkthrough: the service specification's end-to-end flow with curl.
#
#   bash examples/walkthrough.sh            (from anywhere; needs node >= 20, npm deps, curl)
#
# Starts, on free loopback ports and a temporary data directory:
#   - the sidecar (development mailer: the login code is read from its log line `devLoginCode`),
#   - the sample protected API (examples/upstream.ts),
#   - the gateway in front of it (gateway-plugin/standalone/main.ts),
# then runs: sign up (e-mail code) -> onboarding -> register a platform -> create an agent ->
# self-request + approve a delegation (fewer scopes than asked) -> calls through the gateway
# with X-Service-Proof (401 with a challenge, allow, deny) -> verify directly -> revoke ->
# audit events, and shows the decision counters moving in /metrics.
# Every wait is bounded; the processes and the data directory are removed on exit.
# WALKTHROUGH_KEEP=1 keeps the data directory and logs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/agent-authz-walkthrough.XXXXXX")"
JAR="$WORK/cookies.txt"
PIDS=()

cleanup() {
  local code=$?
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    [ -z "$pid" ] && continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ "${WALKTHROUGH_KEEP:-0}" = 1 ] || [ "$code" -ne 0 ]; then
    echo "logs and data kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
fail() { echo "walkthrough: $*" >&2; exit 1; }

# jget <path> : reads JSON on stdin, prints the value at a dotted path (strings raw).
jget() {
  node -e '
    let s = ""; process.stdin.on("data", (d) => { s += d; }).on("end", () => {
      let v; try { v = JSON.parse(s); } catch { process.exit(3); }
      for (const k of process.argv[1].split(".")) v = v == null ? undefined : v[k];
      if (v === undefined) process.exit(4);
      process.stdout.write(typeof v === "string" ? v : JSON.stringify(v));
    });' "$1"
}

free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'; }

# wait_for <url> <seconds>: until the URL answers 2xx.
wait_for() {
  local url=$1 secs=$2 i
  for i in $(seq 1 $((secs * 10))); do
    curl -fsS --max-time 2 "$url" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# req <method> <url> [json body] [extra curl args...]: prints the body; the status goes to $WORK/status.
req() {
  local method=$1 url=$2 body=${3:-}
  shift $(( $# >= 3 ? 3 : $# ))
  local args=(-sS --max-time 15 -X "$method" -c "$JAR" -b "$JAR" -o "$WORK/body" -w '%{http_code}' "$@")
  if [ -n "$body" ]; then args+=(-H 'content-type: application/json' --data-raw "$body"); fi
  curl "${args[@]}" "$url" > "$WORK/status"
  cat "$WORK/body"
}
status() { cat "$WORK/status"; }
expect() { local want=$1 got; got=$(status); [ "$got" = "$want" ] || fail "expected HTTP $want, got $got: $(cat "$WORK/body")"; }
csrf() { awk '$6 == "service_csrf" { v = $7 } END { print v }' "$JAR"; }

decisions() { # decision counters of the sidecar
  curl -fsS --max-time 5 "$SIDECAR/metrics" | grep -E '^agent_authz_verify_decisions_total' || echo '(no decisions yet)'
}

SIDECAR_PORT=$(free_port); UPSTREAM_PORT=$(free_port); GATEWAY_PORT=$(free_port); GATEWAY_METRICS_PORT=$(free_port)
SIDECAR="http://127.0.0.1:$SIDECAR_PORT"
GATEWAY="http://127.0.0.1:$GATEWAY_PORT"
EMAIL="ada.walkthrough@example.com"

step "Start the sidecar on $SIDECAR (data: $WORK/data)"
# Only the variables set here: unknown SIDECAR_* variables would stop startup.
env $(env | grep -o '^SIDECAR_[A-Z_]*' | sed 's/^/-u /') \
  SIDECAR_HOST=127.0.0.1 SIDECAR_PORT="$SIDECAR_PORT" SIDECAR_DATA_DIR="$WORK/data" \
  SIDECAR_INSECURE_COOKIES=1 SIDECAR_LOG_LEVEL=info \
  node bin/agent-authz-sidecar.mjs > "$WORK/sidecar.log" 2>&1 &
PIDS+=($!)
wait_for "$SIDECAR/readyz" 30 || fail "the sidecar did not become ready (see $WORK/sidecar.log)"
curl -fsS "$SIDECAR/healthz"; echo
curl -fsS "$SIDECAR/readyz"; echo

step "Sign up: send-code, then verify-code with the code from the development mailer's log line"
req POST "$SIDECAR/v1/auth/email/send-code" "{\"email\":\"$EMAIL\"}"; echo; expect 200
CODE=""
for _ in $(seq 1 50); do
  CODE=$(grep devLoginCode "$WORK/sidecar.log" | tail -1 | jget devLoginCode 2>/dev/null || true)
  [ -n "$CODE" ] && break; sleep 0.1
done
[ -n "$CODE" ] || fail "no login code in the sidecar log"
echo "code from the log: $CODE"
req POST "$SIDECAR/v1/auth/email/verify-code" "{\"email\":\"$EMAIL\",\"code\":\"$CODE\"}"; echo; expect 200
echo "cookies: service_session (HttpOnly) and service_csrf=$(csrf | cut -c1-12)..."

step "Onboarding: profile, account type individual"
req POST "$SIDECAR/v1/auth/onboarding/profile" '{"first_name":"Ada","last_name":"Lovelace"}' -H "X-Service-CSRF: $(csrf)"; echo; expect 200
req POST "$SIDECAR/v1/auth/onboarding/account-type" '{"account_type":"individual"}' -H "X-Service-CSRF: $(csrf)"; echo; expect 200

step "Register a platform (yields a connection and an API key, shown once)"
REG=$(req POST "$SIDECAR/v1/service/platforms/personal" '{"name":"Walkthrough platform","surface_type":"agentic_api","default_allowed_scopes":["data:read","data:write","payments:send"]}' -H "X-Service-CSRF: $(csrf)"); expect 200
API_KEY=$(echo "$REG" | jget api_key)
CONNECTION=$(echo "$REG" | jget connection_id)
echo "$REG" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const r=JSON.parse(s);for(const k of ["api_key","signing_secret","webhook_signing_secret"])r[k]=r[k].slice(0,12)+"...";console.log(JSON.stringify(r,null,2))})'

step "Create an agent (API key)"
AGENT=$(req POST "$SIDECAR/v1/service/connections/$CONNECTION/agents" '{"name":"walkthrough-agent","agent_type":"api_agent"}' -H "X-Service-API-Key: $API_KEY"); expect 200
AGENT_ID=$(echo "$AGENT" | jget agent_id)
echo "agent_id: $AGENT_ID, custody_mode: $(echo "$AGENT" | jget custody_mode)"

step "Request a delegation, approve fewer scopes than asked (data:read only)"
REQ=$(req POST "$SIDECAR/v1/service/delegations/self-request" "{\"connection_id\":\"$CONNECTION\"}" -H "X-Service-CSRF: $(csrf)"); expect 200
REQUEST_ID=$(echo "$REQ" | jget request_id)
CERT=$(req POST "$SIDECAR/v1/service/delegations/requests/$REQUEST_ID/approve" '{"approved_scope":["data:read"]}' -H "X-Service-CSRF: $(csrf)"); expect 200
CERT_ID=$(echo "$CERT" | jget cert_id)
echo "$CERT"; echo

echo; echo "decision counters before:"; decisions

# present_for <challenge>: prints the X-Service-Proof header value (base64 of the bundle JSON).
present_for() {
  req POST "$SIDECAR/v1/service/connections/$CONNECTION/agents/$AGENT_ID/present" "{\"challenge\":\"$1\"}" -H "X-Service-API-Key: $API_KEY" > "$WORK/present.json"
  expect 200
  jget proof_header < "$WORK/present.json"
}

GATEWAY_UP=0
if [ -f gateway-plugin/standalone/main.ts ]; then
  step "Start the sample API (127.0.0.1:$UPSTREAM_PORT) and the gateway ($GATEWAY) with the platform's API key"
  UPSTREAM_HOST=127.0.0.1 UPSTREAM_PORT=$UPSTREAM_PORT node --import tsx examples/upstream.ts > "$WORK/upstream.log" 2>&1 &
  PIDS+=($!)
  cat > "$WORK/gateway.yaml" <<EOF
upstream_url: http://127.0.0.1:$UPSTREAM_PORT
sidecar_url: $SIDECAR
api_key_env: GATEWAY_API_KEY
routes:
  - { method: GET, path: /v1/status, public: true }
  - { method: [GET, HEAD], path: /v1/items, scope: "data:read" }
  - { method: POST, path: /v1/items, scope: "data:write" }
  - { method: POST, path: /v1/payments, scope: "payments:send" }
listen: { host: 127.0.0.1, port: $GATEWAY_PORT }
metrics: { host: 127.0.0.1, port: $GATEWAY_METRICS_PORT, path: /metrics }
log_level: info
EOF
  GATEWAY_API_KEY="$API_KEY" node bin/agent-authz-gateway.mjs --config "$WORK/gateway.yaml" > "$WORK/gateway.log" 2>&1 &
  PIDS+=($!)
  wait_for "http://127.0.0.1:$UPSTREAM_PORT/healthz" 30 || fail "the sample API did not start (see $WORK/upstream.log)"
  wait_for "$GATEWAY/readyz" 30 || fail "the gateway did not become ready (see $WORK/gateway.log)"
  GATEWAY_UP=1

  step "Through the gateway: a public route, then a protected one without a proof (401 + challenge)"
  req GET "$GATEWAY/v1/status"; echo; expect 200
  req GET "$GATEWAY/v1/items" "" -D "$WORK/headers"; echo; expect 401
  grep -i '^www-authenticate' "$WORK/headers" | cut -c1-120 || true
  CHALLENGE=$(jget error.challenge < "$WORK/body")

  step "The agent presents on that challenge and retries with X-Service-Proof: allow, forwarded"
  PROOF=$(present_for "$CHALLENGE")
  echo "X-Service-Proof: $(echo "$PROOF" | cut -c1-48)... (${#PROOF} characters)"
  req GET "$GATEWAY/v1/items" "" -H "X-Service-Proof: $PROOF"; echo; expect 200

  step "A scope that was not delegated (POST /v1/items needs data:write): 403 not_delegated"
  req POST "$GATEWAY/v1/items" '{"name":"new"}' >/dev/null; expect 401
  CHALLENGE=$(jget error.challenge < "$WORK/body")
  PROOF=$(present_for "$CHALLENGE")
  req POST "$GATEWAY/v1/items" '{"name":"new"}' -H "X-Service-Proof: $PROOF"; echo; expect 403

  step "Replaying a spent proof: refused (403 proof_rejected, reason invalid_challenge)"
  req POST "$GATEWAY/v1/items" '{"name":"new"}' -H "X-Service-Proof: $PROOF"; echo; expect 403
else
  step "gateway-plugin/standalone/main.ts is not there: skipping the gateway part"
fi

step "Verify directly (what a gateway or middleware does): challenge + present + verify"
CH=$(req POST "$SIDECAR/v1/service/challenge" "" -H "X-Service-API-Key: $API_KEY" | jget challenge); expect 200
present_for "$CH" >/dev/null
BUNDLE=$(jget proof_bundle < "$WORK/present.json")
req POST "$SIDECAR/v1/service/verify" "{\"proof_bundle\":$BUNDLE,\"required_scope\":\"data:read\"}" -H "X-Service-API-Key: $API_KEY"; echo; expect 200

step "Revoke the certificate; a proof built before is now denied (delegation_revoked)"
CH=$(req POST "$SIDECAR/v1/service/challenge" "" -H "X-Service-API-Key: $API_KEY" | jget challenge); expect 200
PROOF=$(present_for "$CH")
BUNDLE=$(jget proof_bundle < "$WORK/present.json")
req POST "$SIDECAR/v1/service/delegations/$CERT_ID/revoke" '{"reason":"walkthrough"}' -H "X-Service-CSRF: $(csrf)"; echo; expect 200
if [ "$GATEWAY_UP" = 1 ]; then
  req GET "$GATEWAY/v1/items" "" -H "X-Service-Proof: $PROOF"; echo; expect 403
else
  req POST "$SIDECAR/v1/service/verify" "{\"proof_bundle\":$BUNDLE,\"required_scope\":\"data:read\"}" -H "X-Service-API-Key: $API_KEY"; echo; expect 200
fi
CH=$(req POST "$SIDECAR/v1/service/challenge" "" -H "X-Service-API-Key: $API_KEY" | jget challenge)
req POST "$SIDECAR/v1/service/connections/$CONNECTION/agents/$AGENT_ID/present" "{\"challenge\":\"$CH\"}" -H "X-Service-API-Key: $API_KEY"; echo; expect 404

step "Audit events (newest first)"
req GET "$SIDECAR/v1/service/audit/personal?limit=25" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const e of JSON.parse(s).events)console.log(e.event_type.padEnd(16),e.details.decision??"",e.details.decision_reason??"")})'
expect 200

step "The decision counters moved (sidecar /metrics)"
decisions
if [ "$GATEWAY_UP" = 1 ]; then
  echo; echo "gateway (metrics listener 127.0.0.1:$GATEWAY_METRICS_PORT):"
  curl -fsS --max-time 5 "http://127.0.0.1:$GATEWAY_METRICS_PORT/metrics" | grep -E '^agent_authz_gateway_(requests|fail_open)_total' || true
fi

step "Done: stopping the processes (SIGTERM, graceful)"
