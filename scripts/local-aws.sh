#!/usr/bin/env bash
# `make local-aws`: sked's AWS deployment on this machine, without an AWS account.
#
#  1. moto server on 127.0.0.1:$LOCAL_AWS_PORT (PyPI `moto[server]`, installed into .venv-moto/
#     by scripts/moto-env.sh). With AWS_ENDPOINT_URL already set, that endpoint is used
#     instead and nothing is started (LocalStack: AWS_ENDPOINT_URL=http://localhost:4566).
#  2. The resources — table, queues, log bucket and group (and with LOCAL_AWS_ECS=1 the ECS
#     cluster and task definition) — by the same bootstrap code the tests use:
#     `cargo run -p sked-aws --example bootstrap`.
#  3. The three Lambda functions under `cargo lambda watch` (cargo-lambda from
#     scripts/aws-tools.sh), on 127.0.0.1:$API_PORT. The API answers at
#     http://127.0.0.1:$API_PORT/lambda-url/sked-fn-api  (e.g. `SKED_URL=<that> sked jobs list`).
#  4. $WORKER_PROCS `sked worker --backend aws` processes (`--workers $WORKER_CONCURRENCY`),
#     if the sked binary has its `aws` feature.
#  5. The sweeper function invoked every $SWEEP_EVERY seconds (EventBridge Scheduler's job).
#  6. The DLQ polled every $SWEEP_EVERY seconds, each batch handed to the DLQ function as an
#     SQS event and deleted unless reported failed (the SQS event source mapping's job).
#
# Ctrl-C or TERM stops everything this script started (see cleanup). Logs and the environment file (source it to
# point your own tools at the same resources) are in $LOCAL_AWS_DIR.
set -euo pipefail
set -m # every background job gets its own process group, so cleanup can stop its children

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

LOCAL_AWS_PORT="${LOCAL_AWS_PORT:-5055}"
API_PORT="${API_PORT:-9000}"
SWEEP_EVERY="${SWEEP_EVERY:-10}"
WORKER_PROCS="${WORKER_PROCS:-2}"
WORKER_CONCURRENCY="${WORKER_CONCURRENCY:-4}"
LOCAL_AWS_ECS="${LOCAL_AWS_ECS:-0}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
LOCAL_AWS_DIR="${LOCAL_AWS_DIR:-$CARGO_TARGET_DIR/local-aws}"
mkdir -p "$LOCAL_AWS_DIR"

say() { printf '[local-aws] %s\n' "$*" >&2; }

# Everything started goes into `pids` (each a process group leader, by `set -m`). On exit,
# Ctrl-C (INT) or TERM, cleanup stops them all: TERM to each group and to every descendant
# (some leave their group: cargo lambda watch starts the functions in groups of their own),
# up to 5 s for them to go, then KILL for what is left; then it reaps them.
pids=()
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}
# Those of the given pids still running (zombies are gone already, only not reaped).
alive() {
    [ "$#" -gt 0 ] || return 0
    ps -o pid=,stat= -p "$(IFS=,; echo "$*")" 2>/dev/null | awk '$2 !~ /^Z/ {print $1}'
}
cleanup() {
    trap - EXIT INT TERM
    [ "${#pids[@]}" -gt 0 ] || return 0
    say "stopping ${#pids[@]} process groups"
    local all=() pid left=()
    for pid in "${pids[@]}"; do
        all+=("$pid")
        while read -r child; do all+=("$child"); done < <(descendants "$pid")
    done
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    kill -TERM "${all[@]}" 2>/dev/null || true
    for _ in $(seq 1 50); do
        mapfile -t left < <(alive "${all[@]}")
        [ "${#left[@]}" -eq 0 ] && break
        sleep 0.1
    done
    if [ "${#left[@]}" -gt 0 ]; then
        say "killing ${#left[@]} processes that did not stop on TERM"
        for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
        kill -KILL "${left[@]}" 2>/dev/null || true
    fi
    wait 2>/dev/null || true
    say "stopped"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs one step in the background and waits for it: bash runs a trap only once the foreground
# command ends, so a step run in the foreground (a compile, a long curl) would hold Ctrl-C and
# TERM back until it finished; `wait` is interrupted at once, and cleanup stops the step too.
step() {
    local pid rc=0
    "$@" &
    pid=$!
    pids+=("$pid")
    wait "$pid" || rc=$?
    unset 'pids[-1]'
    return "$rc"
}

# ------------------------------------------------------------------ 1. the endpoint
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_EC2_METADATA_DISABLED=true
python="$(scripts/moto-env.sh)" # the moto venv's python; it has boto3 (a moto dependency)
if [ -n "${AWS_ENDPOINT_URL:-}" ]; then
    say "using the endpoint $AWS_ENDPOINT_URL (not starting moto)"
else
    export AWS_ENDPOINT_URL="http://127.0.0.1:$LOCAL_AWS_PORT"
    say "starting moto server on $AWS_ENDPOINT_URL (log: $LOCAL_AWS_DIR/moto.log)"
    # DynamoDB requests one at a time, so transactions are isolated as on DynamoDB.
    "$python" scripts/moto-server.py -H 127.0.0.1 -p "$LOCAL_AWS_PORT" >"$LOCAL_AWS_DIR/moto.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 300); do
        curl -sf -m 2 -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" && break
        kill -0 "${pids[0]}" 2>/dev/null || { say "moto server exited; see $LOCAL_AWS_DIR/moto.log"; exit 1; }
        step sleep 0.2
    done
    curl -sf -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" || { say "moto server did not answer"; exit 1; }
fi

# ------------------------------------------------------------------ 2. the resources
# Names only: the bootstrap creates queues by the last segment and prints the real URLs.
export SKED_TABLE="${SKED_TABLE:-sked}"
export SKED_QUEUE_HIGH="$AWS_ENDPOINT_URL/queue/sked-high"
export SKED_QUEUE_NORMAL="$AWS_ENDPOINT_URL/queue/sked-normal"
export SKED_QUEUE_LOW="$AWS_ENDPOINT_URL/queue/sked-low"
export SKED_QUEUE_DLQ="$AWS_ENDPOINT_URL/queue/sked-dlq"
export SKED_LOG_BUCKET="${SKED_LOG_BUCKET:-sked-logs}"
export SKED_LOG_GROUP="${SKED_LOG_GROUP:-/sked/local/runs}"
if [ "$LOCAL_AWS_ECS" = 1 ]; then
    # moto accepts RunTask but runs nothing: container tasks go through the motions only.
    read -r subnet group < <("$python" - <<'PY'
import boto3, os
ec2 = boto3.client("ec2", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ["AWS_REGION"])
subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
group = ec2.describe_security_groups(GroupNames=["default"])["SecurityGroups"][0]["GroupId"]
print(subnet, group)
PY
    )
    export SKED_ECS_CLUSTER=sked SKED_ECS_TASK_DEFINITION=sked-container-task
    export SKED_ECS_SUBNETS="$subnet" SKED_ECS_SECURITY_GROUPS="$group"
fi
say "creating the resources (cargo run -p sked-aws --example bootstrap)"
step cargo run -q -p sked-aws --example bootstrap >"$LOCAL_AWS_DIR/bootstrap.out"
urls="$(cat "$LOCAL_AWS_DIR/bootstrap.out")"
while IFS='=' read -r name value; do
    case "$name" in SKED_QUEUE_*) export "$name=$value" ;; esac
done <<<"$urls"

# No API Gateway verifies a JWT here: every request acts as this identity (never set on AWS).
export SKED_LOCAL_IDENTITY="${SKED_LOCAL_IDENTITY:-default:operator}"
envfile="$LOCAL_AWS_DIR/env"
env | grep -E '^(AWS_(REGION|ENDPOINT_URL|ACCESS_KEY_ID|SECRET_ACCESS_KEY|EC2_METADATA_DISABLED)|SKED_[A-Z_]+)=' |
    grep -v '^SKED_URL=' | sort >"$envfile"
say "environment written to $envfile"

# ------------------------------------------------------------------ 3. the functions
# cargo lambda watch compiles each function on its first invocation (the first time, with the
# AWS SDK, several minutes: the API is warmed up below before this script says it is up).
aws_bin="$(scripts/aws-tools.sh)"
say "cargo lambda watch on 127.0.0.1:$API_PORT (log: $LOCAL_AWS_DIR/functions.log)"
PATH="$aws_bin:$PATH" cargo lambda watch -A 127.0.0.1 -P "$API_PORT" --env-file "$envfile" \
    --ignore-changes --timeout 120 >"$LOCAL_AWS_DIR/functions.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$API_PORT/lambda-url/sked-fn-api"
invoke_url() { echo "http://127.0.0.1:$API_PORT/2015-03-31/functions/$1/invocations"; }

# ------------------------------------------------------------------ 4. the workers
has_aws_worker() {
    cargo metadata -q --no-deps --format-version 1 |
        "$python" -c 'import json,sys; m=json.load(sys.stdin); sys.exit(0 if any(p["name"]=="sked" and "aws" in p["features"] for p in m["packages"]) else 1)'
}
workers_note="none"
if has_aws_worker; then
    say "building sked with the aws feature"
    step cargo build -q -p sked --features aws
    for i in $(seq 1 "$WORKER_PROCS"); do
        # --long-lease 60: as the template's workers (WorkerLongLeaseSeconds).
        "$CARGO_TARGET_DIR/debug/sked" worker --backend aws --workers "$WORKER_CONCURRENCY" --long-lease 60 \
            >"$LOCAL_AWS_DIR/worker-$i.log" 2>&1 &
        pids+=($!)
    done
    workers_note="$WORKER_PROCS × sked worker --backend aws --workers $WORKER_CONCURRENCY"
else
    say "MISSING: the sked binary has no 'aws' feature yet, so no workers run: runs are fired and"
    say "         enqueued but stay PENDING. (Needs: cargo build -p sked --features aws; sked worker --backend aws.)"
fi

say "compiling and starting the API function (first time: several minutes)"
for _ in $(seq 1 180); do
    step curl -sf -m 600 -o /dev/null "$api/healthz" && break
    step sleep 2
done
curl -sf -m 10 -o /dev/null "$api/healthz" || { say "the API did not answer; see $LOCAL_AWS_DIR/functions.log"; exit 1; }

# ------------------------------------------------------------------ 5. the sweeper tick
# The tick's payload does not matter to the sweeper; send the sample Scheduler event.
tick='{"source":"local-aws","detail-type":"Scheduled Event","detail":{}}'
[ -f events/eventbridge-scheduler.json ] && tick="$(cat events/eventbridge-scheduler.json)"
sweep_loop() {
    while true; do
        out="$(curl -sS --max-time 120 -H 'content-type: application/json' -d "$tick" \
            "$(invoke_url sked-fn-sweeper)" 2>&1 || true)"
        printf '%s sweeper: %s\n' "$(date -u +%H:%M:%S)" "$out"
        sleep "$SWEEP_EVERY"
    done
}
sweep_loop >"$LOCAL_AWS_DIR/sweeper.log" 2>&1 &
pids+=($!)

# ------------------------------------------------------------------ 6. the DLQ event source
DLQ_URL="$(invoke_url sked-fn-dlq)" SWEEP_EVERY="$SWEEP_EVERY" "$python" -u - >"$LOCAL_AWS_DIR/dlq.log" 2>&1 <<'PY' &
# Emulates Lambda's SQS event source mapping with ReportBatchItemFailures: receive up to 10,
# invoke the function with them as one SQS event, delete all but the reported failures.
import boto3, json, os, time, urllib.request
region = os.environ["AWS_REGION"]
sqs = boto3.client("sqs", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=region)
queue = os.environ["SKED_QUEUE_DLQ"]
arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
wait = max(1, min(20, int(float(os.environ["SWEEP_EVERY"]))))
while True:
    messages = sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=wait, AttributeNames=["All"]
    ).get("Messages", [])
    if not messages:
        continue
    records = [
        {
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m.get("Attributes", {}), "messageAttributes": {},
            "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": arn,
            "awsRegion": region,
        }
        for m in messages
    ]
    request = urllib.request.Request(
        os.environ["DLQ_URL"], data=json.dumps({"Records": records}).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        answer = json.load(urllib.request.urlopen(request, timeout=120)) or {}
    except Exception as e:  # the messages come back after their visibility timeout
        print(f"{time.strftime('%H:%M:%S')} dlq: invoke failed: {e}", flush=True)
        continue
    if "errorType" in answer:
        print(f"{time.strftime('%H:%M:%S')} dlq: function error: {answer}", flush=True)
        continue
    failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
    for m in messages:
        if m["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    print(f"{time.strftime('%H:%M:%S')} dlq: {len(messages) - len(failed)} handled, {len(failed)} failed", flush=True)
PY
pids+=($!)

cat >&2 <<EOF

sked on local AWS is up.
  endpoint   $AWS_ENDPOINT_URL   (region $AWS_REGION, credentials test/test)
  API        $api
             e.g. curl -s $api/v1/jobs
                  SKED_URL=$api $CARGO_TARGET_DIR/debug/sked jobs list
  sweeper    every ${SWEEP_EVERY}s
  DLQ        polled every ${SWEEP_EVERY}s
  workers    $workers_note
  logs       $LOCAL_AWS_DIR/*.log
  env        $envfile   (set -a; . $envfile; set +a — to point other tools at it)
Ctrl-C (or TERM to this script) stops everything.
EOF
wait
