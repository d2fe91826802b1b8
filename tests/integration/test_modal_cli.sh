#!/usr/bin/env bash
# The `lash sandbox` CLI with --backend modal against the fake Modal (h2c, so
# no CA option is needed; credentials and server URL come from a profile in
# MODAL_CONFIG_PATH, as a user's ~/.modal.toml would give them). TAP output.
. "$(dirname "$0")/../lib.sh"
B=${LASH_BUILD:-build}
LASH="$B/bin/lash"

[ -x /usr/bin/python3 ] || skip_all "/usr/bin/python3 missing"
/usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null || skip_all "python3-grpcio/protobuf missing"
command -v protoc >/dev/null || skip_all "protoc missing"

new_tmp state
start_modal_fake "$state" || { echo "Bail out! fake did not start"; cat "$state/server.log"; exit 1; }
export MODAL_CONFIG_PATH="$state/modal.toml"
unset MODAL_TOKEN_ID MODAL_TOKEN_SECRET MODAL_SERVER_URL MODAL_PROFILE

id=$("$LASH" sandbox create --backend modal --workdir /work --tag step=1 --env GREETING=hi)
ok $? "create prints an id ($id)"
out=$("$LASH" sandbox exec "$id" --backend modal -- sh -c 'echo $GREETING from $(pwd)')
ok $? "exec runs"
[ "$out" = "hi from /work" ]; ok $? "exec output is the command's ($out)"
"$LASH" sandbox exec "$id" --backend modal -- sh -c 'exit 7'
[ $? = 7 ]; ok $? "exec exits with the command's code"
printf 'data\n' | "$LASH" sandbox write "$id" --backend modal in/file.txt
ok $? "write from stdin (parents created)"
[ "$("$LASH" sandbox read "$id" --backend modal in/file.txt)" = "data" ]; ok $? "read back"
"$LASH" sandbox ls "$id" --backend modal in | grep -q '^file.txt$'; ok $? "ls lists it"
"$LASH" sandbox tags "$id" --backend modal | grep -q '^step=1$'; ok $? "tags show the create tag"
"$LASH" sandbox read "$id" --backend modal nope 2>/dev/null
[ $? = 1 ]; ok $? "a missing file exits 1"
snap=$("$LASH" sandbox snapshot "$id" --backend modal); ok $? "snapshot prints an image id ($snap)"
fork=$("$LASH" sandbox create --backend modal --from-snapshot "$snap" --workdir /work)
[ "$("$LASH" sandbox read "$fork" --backend modal in/file.txt)" = "data" ]; ok $? "create --from-snapshot starts from it"
"$LASH" sandbox list --backend modal >"$state/list"
grep -q "^$id	running" "$state/list" && grep -q "^$fork	running" "$state/list"
ok $? "list --backend modal shows both"
"$LASH" sandbox destroy "$fork" --backend modal; ok $? "destroy the fork"
big=$("$LASH" sandbox create --backend modal --image python:3.11-slim --app cli-app --cpu 2 \
        --memory 1024 --idle-timeout 120)
ok $? "create with Modal's options"
/usr/bin/python3 - "$state/calls.jsonl" <<'PY'
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
d = [c for c in calls if c["method"] == "SandboxCreateV2"][-1]["request"]["definition"]
assert d["idle_timeout_secs"] == 120 and d["resources"] == {"milli_cpu": 2000, "memory_mb": 1024}, d
assert [c for c in calls if c["method"] == "AppGetOrCreate"][-1]["request"]["app_name"] == "cli-app"
assert [c for c in calls if c["method"] == "ImageGetOrCreate"][-1]["request"]["image"]["dockerfile_commands"] == ["FROM python:3.11-slim"]
PY
ok $? "--image --app --cpu --memory --idle-timeout reach Modal"
"$LASH" sandbox destroy "$big" --backend modal; ok $? "destroy it"
pub=$("$LASH" sandbox create --backend modal --network on --publish 8000 --publish 8001 2>"$state/err")
ok $? "create --publish prints an id ($pub)"
grep -qE '^port 8000: https://127\.0\.0\.1:[0-9]+$' "$state/err" && grep -qE '^port 8001: https://' "$state/err"
ok $? "create --publish prints each port's tunnel URL on stderr ($(tr '\n' ' ' <"$state/err"))"
url=$("$LASH" sandbox port "$pub" 8001 --backend modal)
grep -q "^port 8001: $url\$" "$state/err"; ok $? "sandbox port on Modal prints the tunnel's URL ($url)"
"$LASH" sandbox port "$pub" 9000 --backend modal 2>"$state/err2"
rc=$?
[ $rc = 1 ] && grep -q -- '--publish 9000' "$state/err2"; ok $? "a port without a tunnel: exit 1, how to get one (rc $rc)"
"$LASH" sandbox create --publish 8000 2>"$state/err2"
rc=$?
[ $rc = 2 ] && grep -q 'lash sandbox port ID PORT' "$state/err2"; ok $? "--publish on local: a usage error naming sandbox port (rc $rc)"
"$LASH" sandbox destroy "$pub" --backend modal; ok $? "destroy the published one"
"$LASH" sandbox destroy "$id" --backend modal; ok $? "destroy"
"$LASH" sandbox destroy "$id" --backend modal; ok $? "destroy again is fine"
"$LASH" sandbox exec "$id" --backend modal -- true 2>"$state/err"
rc=$?
[ $rc = 3 ] && grep -q unavailable "$state/err"
ok $? "exec on a destroyed sandbox: exit 3 (unavailable) (rc $rc)"
MODAL_CONFIG_PATH="$state/none.toml" "$LASH" sandbox create --backend modal 2>"$state/err"
rc=$?
[ $rc = 4 ] && grep -q MODAL_TOKEN_ID "$state/err"; ok $? "no credentials: exit 4 and how to set them (rc $rc)"
running=$(/usr/bin/python3 -c "import json;s=json.load(open('$state/state.json'))['sandboxes'];print(sum(1 for v in s.values() if v['running']))")
[ "$running" = 0 ]; ok $? "no sandbox left running"
# the fake enforces what grpc-core enforces: no `te: trailers`, no call (the
# request has no body, so the refusal cannot race the upload)
curl -sS -D "$state/h" -o /dev/null --http2-prior-knowledge -X POST -H 'content-type: application/grpc' \
  -H 'x-modal-token-id: ak-fake-id' -H 'x-modal-token-secret: as-fake-secret' \
  "http://127.0.0.1:$port/modal.client.ModalClient/ClientHello"
grep -qi '^grpc-message: Missing :te header' "$state/h"; ok $? "the fake refuses a call without te: trailers"
done_testing
