#!/usr/bin/env bash
# Produce throughput of 100-byte records on one node against three combined nodes on this
# machine, in one run (issue 15's figure): `samsa perf produce` (acks=all, six partitions,
# the Rust producer's defaults) against
#   1. one `samsa broker` with the embedded defaults (a quorum of one), then
#   2. three `samsa broker` processes formatted with one cluster id, each a voter and a
#      broker with its own ports and directory (the README's three-node cluster), the
#      topic's partitions spread over them.
# All the processes share this machine's cores, so the second figure measures the cost of
# spreading (three processes, more connections, smaller batches per broker), not scaling.
# Replication (RF 3, acks=all with min.insync.replicas 2), its latency, the brokers' CPU and
# the disk-derived goal come from `SAMSA_BENCH_BROKERS=3 cargo bench --bench rdkafka_bench`
# (benches/cluster/replicated.rs).
#
#   benches/cluster/run.sh            # NUM_RECORDS (default 2,000,000) per run
#
# It builds the broker first (`cargo build --release --bin samsa`, in $CARGO_TARGET_DIR or
# ./target; SAMSA_BENCH_NO_BUILD=1 skips that, SAMSA_BIN names another binary) and stops every
# broker with SIGTERM when its run ends. Not run by `cargo test` or .ci/run.
set -euo pipefail

READY_WAIT_S=60
NUM_RECORDS=${NUM_RECORDS:-2000000}
RECORD_SIZE=100
PARTITIONS=6

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${SAMSA_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/samsa}
if [ "${SAMSA_BENCH_NO_BUILD:-0}" != 1 ]; then
    (cd "$root" && cargo build --release --bin samsa)
fi

work=$(mktemp -d)
pids=()
stop_all() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

# Waits until `samsa topics list` answers through $1 (bounded by READY_WAIT_S).
wait_ready() {
    for _ in $(seq 1 $((READY_WAIT_S * 10))); do
        if "$bin" topics list -b "$1" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    echo "no broker answered at $1 within ${READY_WAIT_S}s" >&2
    return 1
}

perf() {
    "$bin" perf produce --topic "$1" --num-records "$NUM_RECORDS" --record-size "$RECORD_SIZE" \
        --partitions "$PARTITIONS" --bootstrap-server "$2"
}

echo "== one node (quorum of one), $NUM_RECORDS records of $RECORD_SIZE bytes, $PARTITIONS partitions"
"$bin" broker --override log.dirs="$work/single" \
    --override listeners=PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093 \
    2>"$work/single.log" &
pids+=($!)
wait_ready 127.0.0.1:29092
perf single 127.0.0.1:29092
stop_all

echo "== three combined nodes, the partitions spread over them"
cluster_id=$("$bin" storage random-uuid)
voters=1@127.0.0.1:29193,2@127.0.0.1:29194,3@127.0.0.1:29195
for id in 1 2 3; do
    "$bin" storage format --cluster-id "$cluster_id" --override node.id=$id \
        --override log.dirs="$work/node-$id" >/dev/null
done
for id in 1 2 3; do
    "$bin" broker --override node.id=$id --override controller.quorum.voters=$voters \
        --override listeners=PLAINTEXT://127.0.0.1:$((29290 + id)),CONTROLLER://127.0.0.1:$((29192 + id)) \
        --override log.dirs="$work/node-$id" --override offsets.topic.replication.factor=1 \
        2>"$work/node-$id.log" &
    pids+=($!)
done
for id in 1 2 3; do wait_ready 127.0.0.1:$((29290 + id)); done
perf spread 127.0.0.1:29291
"$bin" topics describe spread -b 127.0.0.1:29292
stop_all
