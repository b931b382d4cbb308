#!/usr/bin/env bash
# The group benchmarks against the release broker, each on a fresh broker in a temporary
# directory with the default settings (sync before acknowledgement,
# group.initial.rebalance.delay.ms=3000, __consumer_offsets with 50 partitions):
#
#   benches/groups/run.sh sigkill   # SIGKILL -> reassignment, 3 confluent-kafka members (~2 min)
#   benches/groups/run.sh join      # 10 members joining at once -> Stable (~1 min)
#   benches/groups/run.sh commit    # OffsetCommit latency at 1,000/s (`samsa perf commit`) and
#                                   # the disk's synced-write reference (~35 s)
#   benches/groups/run.sh consume   # 3 members of `samsa perf consume --group` against one
#                                   # assign-mode `samsa perf consume` of the same topic
#   benches/groups/run.sh all       # the four in turn
#
# It builds the broker first (`cargo build --release --bin samsa`, in $CARGO_TARGET_DIR or
# ./target; SAMSA_BENCH_NO_BUILD=1 skips that, SAMSA_BIN names another binary), prints the machine's state (load, the busiest
# processes) before each benchmark, and stops the broker with SIGTERM when the benchmark ends
# (SIGKILL if it does not exit within STOP_WAIT_S). The Python client comes from
# $SAMSA_PYTHON (default .ci/venv/bin/python). SAMSA_BENCH_ROUNDS sets the rounds of sigkill and
# join; extra `samsa perf commit` options go in SAMSA_BENCH_COMMIT_ARGS. Not run by `cargo test`
# or .ci/run.
set -euo pipefail

READY_WAIT_S=30
STOP_WAIT_S=30

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${SAMSA_PYTHON:-$root/.ci/venv/bin/python}
bin=${SAMSA_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/samsa}

usage() {
    echo "usage: $0 sigkill|join|commit|consume|all" >&2
    exit 2
}
[ $# -eq 1 ] || usage
case $1 in sigkill | join | commit | consume | all) ;; *) usage ;; esac

if [ "${SAMSA_BENCH_NO_BUILD:-0}" != 1 ]; then
    (cd "$root" && cargo build --release --bin samsa)
fi

broker_pid=
tmp=
stop_broker() {
    if [ -n "$broker_pid" ] && kill -0 "$broker_pid" 2>/dev/null; then
        kill -TERM "$broker_pid"
        for _ in $(seq $((STOP_WAIT_S * 10))); do
            kill -0 "$broker_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    fi
    broker_pid=
}
cleanup() {
    stop_broker
    [ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT

start_broker() {
    tmp=$(mktemp -d -t samsa-group-bench-XXXXXX)
    port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$bin" broker --override "listeners=PLAINTEXT://127.0.0.1:$port" \
        --override "log.dirs=$tmp/data" 2>"$tmp/broker.log" &
    broker_pid=$!
    for _ in $(seq $((READY_WAIT_S * 10))); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            export SAMSA_BOOTSTRAP=127.0.0.1:$port
            return
        fi
        kill -0 "$broker_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "the broker did not listen on $port within $READY_WAIT_S s:" >&2
    cat "$tmp/broker.log" >&2
    exit 1
}

machine_state() {
    echo "== $(date -u +%FT%TZ) $(git -C "$root" rev-parse --short HEAD) $(nproc) cpus, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    ps -eo pcpu,pid,etime,comm --sort=-pcpu | head -6
}

run() {
    echo "===== $1"
    machine_state
    start_broker
    case $1 in
        sigkill) "$python" "$here/sigkill_reassign.py" ;;
        join) "$python" "$here/join_storm.py" ;;
        commit)
            # shellcheck disable=SC2086 # extra options are meant to split
            "$bin" perf commit --bootstrap-server "$SAMSA_BOOTSTRAP" --topic bench-commit \
                ${SAMSA_BENCH_COMMIT_ARGS:-} --json
            stop_broker
            "$python" "$here/sync_reference.py" "$tmp/data"
            ;;
        consume)
            # 1,000,000 records of 1 KiB (SAMSA_BENCH_CONSUME_RECORDS, _RECORD_BYTES) over 6 partitions; then the whole topic
            # read in assign mode, then by 3 members at once, each asked for a third.
            local n=${SAMSA_BENCH_CONSUME_RECORDS:-1000000} size=${SAMSA_BENCH_CONSUME_RECORD_BYTES:-1024}
            "$bin" perf produce --bootstrap-server "$SAMSA_BOOTSTRAP" --topic bench-consume \
                --partitions 6 --num-records "$n" --record-size "$size" --json >/dev/null
            echo "assign mode:"
            "$bin" perf consume --bootstrap-server "$SAMSA_BOOTSTRAP" --topic bench-consume \
                --num-records "$n" --json 2>/dev/null
            echo "3 members of one group:"
            local pids=() i
            for i in 1 2 3; do
                "$bin" perf consume --bootstrap-server "$SAMSA_BOOTSTRAP" --topic bench-consume \
                    --num-records $((n / 3)) --group bench-group --json >"$tmp/member$i.json" 2>/dev/null &
                pids+=($!)
            done
            wait "${pids[@]}"
            cat "$tmp"/member*.json
            "$python" - "$tmp"/member*.json <<'PY'
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
records = sum(r["records"] for r in runs)
span_s = (max(r["last_record_wall_ms"] for r in runs) - min(r["first_record_wall_ms"] for r in runs)) / 1000
print(json.dumps({"group_members": len(runs), "records": records, "span_s": round(span_s, 3),
                  "records_per_s": round(records / max(span_s, 1e-9), 1),
                  "join_s_max": max(r["join_s"] for r in runs)}))
PY
            ;;
    esac
    stop_broker
    rm -rf "$tmp"
    tmp=
}

if [ "$1" = all ]; then
    for b in sigkill join commit consume; do run "$b"; done
else
    run "$1"
fi
