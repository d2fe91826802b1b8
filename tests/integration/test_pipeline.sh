#!/usr/bin/env bash
# The cross-step pipeline of examples/pipeline on the local backend, one
# process per step as an orchestrator runs it: provision with an owner,
# stage input, two attached agent runs in turn, a wrong owner refused,
# collect the report, destroy. Then the identity rules from the command
# line: a sandbox held by another holder is refused, the same holder
# re-enters, Airflow's environment supplies owner and holder. Then the same
# pipeline on the fake Modal (tests/modal_fake). TAP output.
. "$(dirname "$0")/../lib.sh"
LASH=$PWD/$BUILD/bin/lash
[ -x "$LASH" ] || skip_all "$LASH is not built"
ROOT=$(mktemp -d); OUT=$(mktemp -d)
chmod 711 "$ROOT"
at_exit 'rm -rf "$ROOT" "$OUT"'
export LASH_SANDBOX_ROOT=$ROOT
unset AIRFLOW_CTX_DAG_ID AIRFLOW_CTX_DAG_RUN_ID AIRFLOW_CTX_TASK_ID AIRFLOW_CTX_MAP_INDEX


# (stderr apart: where no disk quota can be made lash warns there once)
probe=$("$LASH" sandbox create --timeout 5 2>"$ROOT.probe.err"); rc=$?
if [ $rc -ne 0 ]; then
  skip_all "the local sandbox cannot run here: $(cat "$ROOT.probe.err")"
fi
rm -f "$ROOT.probe.err"
"$LASH" sandbox destroy "$probe" >/dev/null 2>&1

# -- the example pipeline, end to end
OWNER="pipeline/test-$$"
out=$(OWNER=$OWNER LASH=$LASH sh examples/pipeline/run.sh "$OUT" 2>"$OUT/stderr"); rc=$?
err=$(cat "$OUT/stderr")
same "examples/pipeline/run.sh succeeds" "$rc" "0"
same "the collected report carries both steps' work" "$(cat "$OUT/report.md" 2>/dev/null)" "# Orders report

- 4 orders, 438.75 in total; the largest is 210.00 from initech

## Review

- Checked against /workspace/input/orders.csv: the figures match."
H=$(printf '%s\n' "$out" | sed -n 's/^sandbox //p')
contains "the wrong owner is refused, naming the handle, the owner presented and the owner found" "$err" \
  "lash run: refused: Sandbox '$H' is not owned by 'someone-else': it carries owner '$OWNER'. Attach with the owner the provisioning step stamped"
contains "the second step saw the first step's file" "$out" "Reviewed /workspace/report.md and signed it off."
same "nothing is left under the state root" "$("$LASH" sandbox list)" ""
tags=$("$LASH" sandbox tags "$H" 2>&1); rc=$?
same "the destroyed sandbox is gone (exit 3, unavailable)" "$rc" "3"

# -- holder rules from the command line
H=$("$LASH" sandbox create --owner owner-1 --timeout 600)
"$LASH" sandbox write "$H" /workspace/input/orders.csv < examples/pipeline/orders.csv
"$LASH" run examples/pipeline/analyse.lua "Analyse the orders." --attach "$H" --owner owner-1 --no-stream >/dev/null 2>&1
same "a finished run leaves the owner and no holder" "$("$LASH" sandbox tags "$H" | grep -E '^lash_(owner|holder)=')" \
  "lash_owner=owner-1"
"$LASH" sandbox attach "$H" --owner owner-1 --holder step-7 >/dev/null
err=$("$LASH" run examples/pipeline/analyse.lua "Analyse the orders." --attach "$H" --owner owner-1 2>&1 >/dev/null); rc=$?
same "a sandbox held by another holder is refused (exit 5)" "$rc" "5"
contains "the refusal names the holder found" "$err" \
  "lash run: refused: Sandbox '$H' is already held by 'step-7', and one run uses a sandbox at a time."
"$LASH" run examples/pipeline/analyse.lua "Review the report." --attach "$H" --owner owner-1 --holder step-7 \
  --no-stream >"$OUT/rerun" 2>&1; rc=$?
same "the same holder re-enters (a retry of the same step)" "$rc" "0"
same "and releases its mark at the end" "$("$LASH" sandbox tags "$H" | grep -c '^lash_holder=')" "0"
err=$("$LASH" run examples/pipeline/analyse.lua "x" --owner owner-1 2>&1); rc=$?
same "--owner without --attach is a usage error" "$rc:$(printf '%s' "$err" | head -1)" \
  "2:lash run: --owner only applies together with --attach"
err=$("$LASH" run examples/pipeline/analyse.lua "x" --attach "$H" 2>&1); rc=$?
same "outside an orchestrator the owner must be given" "$rc" "6"
contains "and the message says how" "$err" "attach_to needs an owner"
# one spec for standalone and attached runs: sandbox_agent.yaml sets
# sandbox_timeout, which only creation uses
err=$("$LASH" run examples/sandbox_agent.yaml "x" --model test --attach "$H" --owner owner-1 --no-stream \
  2>&1 >/dev/null); rc=$?
same "a spec with creation-only options attaches" "$rc" "0"
contains "and says what it ignored" "$err" \
  "--attach: the spec's sandbox_timeout applies only when creating a sandbox; ignored"
"$LASH" sandbox destroy "$H"

# -- under Airflow: the DAG run owns, the task instance holds
H=$("$LASH" sandbox create --owner "etl/manual__2026-01-01" --timeout 600)
"$LASH" sandbox write "$H" /workspace/input/orders.csv < examples/pipeline/orders.csv
AIRFLOW_CTX_DAG_ID=etl AIRFLOW_CTX_DAG_RUN_ID=manual__2026-01-01 AIRFLOW_CTX_TASK_ID=analyse \
  "$LASH" run examples/pipeline/analyse.lua "Analyse the orders." --attach "$H" --no-stream >/dev/null 2>&1; rc=$?
same "an Airflow task of the DAG run that created the sandbox attaches without --owner" "$rc" "0"
err=$(AIRFLOW_CTX_DAG_ID=etl AIRFLOW_CTX_DAG_RUN_ID=scheduled__2026-01-02 AIRFLOW_CTX_TASK_ID=analyse \
  "$LASH" run examples/pipeline/analyse.lua "Analyse the orders." --attach "$H" 2>&1 >/dev/null); rc=$?
same "a task of another DAG run is refused (exit 5)" "$rc" "5"
contains "naming both owners" "$err" "is not owned by 'etl/scheduled__2026-01-02': it carries owner 'etl/manual__2026-01-01'"
"$LASH" sandbox destroy "$H"
same "nothing is left at the end" "$("$LASH" sandbox list)" ""

# -- the same pipeline on the fake Modal (when its python deps are here)
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import grpc, google.protobuf' 2>/dev/null; then
  new_tmp state
  start_modal_fake "$state"
  rm -f "$OUT/report.md"
  out=$(MODAL_CONFIG_PATH="$state/modal.toml" BACKEND=modal OWNER="pipeline/modal-$$" LASH=$LASH \
    sh examples/pipeline/run.sh "$OUT" 2>"$OUT/stderr"); rc=$?
  err=$(cat "$OUT/stderr")
  same "on the Modal fake: examples/pipeline/run.sh succeeds" "$rc" "0"
  same "on the Modal fake: the report carries both steps' work" "$(tail -1 "$OUT/report.md" 2>/dev/null)" \
    "- Checked against /workspace/input/orders.csv: the figures match."
  contains "on the Modal fake: the wrong owner is refused" "$err" \
    "is not owned by 'someone-else': it carries owner 'pipeline/modal-$$'"
  running=$(/usr/bin/python3 -c "import json;s=json.load(open('$state/state.json'))['sandboxes'];print(sum(1 for v in s.values() if v['running']))")
  same "on the Modal fake: no sandbox left running" "$running" "0"
else
  skip "the pipeline on the Modal fake" "python3-grpcio/protobuf missing"
fi

done_testing
