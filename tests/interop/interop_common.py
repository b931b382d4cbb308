"""Shared by the Python interop scripts: the records every client produces, and the check
that what a client read back is exactly what the broker acknowledged.

Each script produces, per compression codec, RECORDS keyed records with headers and an
explicit CreateTime timestamp into its own 3-partition topic, remembers the (partition,
offset) of every acknowledgement, reads every partition back from offset 0 to its end offset
and hands both to `verify`. A mismatch is recorded, never raised, so one run reports every
problem; `Summary.exit` prints one line per codec and exits non-zero if anything failed.

Environment:
  SAMSA_BOOTSTRAP        the broker's address, host:port (required)
  SAMSA_INTEROP_RECORDS  records per codec (default 2000)
  SAMSA_INTEROP_CONFIG_APIS=1  also run the check of DescribeConfigs, (Incremental)AlterConfigs
                         and CreatePartitions (off until the broker answers them)
"""

import os
import sys
import time
import traceback
import uuid

PARTITIONS = 3
# Every this many records the value is null (a Kafka null, not an empty byte string).
NULL_VALUE_EVERY = 97
# Every this many records a header with an empty value is added.
EMPTY_HEADER_EVERY = 5
# Bounds of every wait in the scripts, so a silent broker fails a run instead of hanging it.
OPERATION_TIMEOUT_S = 60
READ_TIMEOUT_S = 120
# Mismatches printed per codec; the rest are only counted.
MISMATCHES_SHOWN_MAX = 20


def bootstrap():
    value = os.environ.get("SAMSA_BOOTSTRAP")
    if not value:
        print("SAMSA_BOOTSTRAP is not set (the broker's host:port)", file=sys.stderr)
        sys.exit(2)
    return value


# Keys every topic's DescribeConfigs answer must include (Kafka lists every topic config).
CONFIG_KEYS_EXPECTED = ("cleanup.policy", "retention.ms", "max.message.bytes")
# The value the config check sets, and the partition count it grows the topic to.
RETENTION_MS_SET = "3600000"
PARTITIONS_GROWN = PARTITIONS + 1


def config_apis_enabled():
    return os.environ.get("SAMSA_INTEROP_CONFIG_APIS") == "1"


def record_count():
    return int(os.environ.get("SAMSA_INTEROP_RECORDS", "2000"))


def unique_suffix():
    """A suffix that keeps topic names and group ids of two runs apart."""
    return uuid.uuid4().hex[:8]


class Rec:
    """One record as produced: index, key, value (None = null), headers, timestamp (ms)."""

    __slots__ = ("i", "key", "value", "headers", "timestamp_ms")

    def __init__(self, i, key, value, headers, timestamp_ms):
        self.i = i
        self.key = key
        self.value = value
        self.headers = headers
        self.timestamp_ms = timestamp_ms


def make_records(codec, n, base_ts_ms=None):
    """`n` records for `codec`. Keys repeat (97 distinct) so every partition gets some and
    the per-key order matters; values carry their index and vary in length so compression
    has something to do. Timestamps are explicit, one millisecond apart, a minute back."""
    if base_ts_ms is None:
        base_ts_ms = int(time.time() * 1000) - 60_000
    out = []
    for i in range(n):
        key = f"k{i % 97}".encode()
        if i % NULL_VALUE_EVERY == NULL_VALUE_EVERY - 1:
            value = None
        else:
            filler = "".join(chr(ord("a") + (i * 7 + j) % 26) for j in range(i % 53))
            value = f"{codec}-v{i:06}-{filler}".encode()
        headers = [("seq", str(i).encode()), ("codec", codec.encode())]
        if i % EMPTY_HEADER_EVERY == 0:
            headers.append(("empty", b""))
        out.append(Rec(i, key, value, headers, base_ts_ms + i))
    return out


def norm_headers(headers):
    """Headers as a list of (str, bytes), whatever container the client used; a header
    value the client reports as None (Kafka's null) stays None."""
    if not headers:
        return []
    out = []
    for k, v in headers:
        if isinstance(k, bytes):
            k = k.decode()
        if v is not None and not isinstance(v, bytes):
            v = bytes(v)
        out.append((k, v))
    return out


class Read:
    """One record as read back."""

    __slots__ = ("partition", "offset", "key", "value", "headers", "timestamp_ms")

    def __init__(self, partition, offset, key, value, headers, timestamp_ms):
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = norm_headers(headers)
        self.timestamp_ms = timestamp_ms


def take_read(read, pending, end_offsets, partition, m):
    """Records one fetched message `m` of kafka-python or aiokafka (the same ConsumerRecord
    shape) in `read`, and drops `partition` from `pending` once its end offset is reached."""
    if m.timestamp_type != 0:
        raise AssertionError(f"partition {partition} offset {m.offset}: "
                             f"timestamp type {m.timestamp_type}, not CreateTime")
    read[partition].append(Read(partition, m.offset, m.key, m.value, m.headers, m.timestamp))
    if m.offset + 1 >= end_offsets[partition]:
        pending.discard(partition)


class CodecResult:
    def __init__(self, codec):
        self.codec = codec
        self.mismatches = []
        self.produced = 0
        self.read = 0
        self.note = ""

    def fail(self, message):
        self.mismatches.append(message)

    @property
    def ok(self):
        return not self.mismatches


def verify(result, records, acks, read_by_partition, end_offsets):
    """Compares what was read with what was acknowledged.

    records: the list of Rec produced; acks: {i: (partition, offset)} from the delivery
    reports; read_by_partition: {partition: [Read in the order the client returned them]};
    end_offsets: {partition: end offset (high watermark)} as the client reported it.
    """
    result.produced = len(acks)
    if len(acks) != len(records):
        result.fail(f"{len(records) - len(acks)} of {len(records)} records were not acknowledged")
    used = {p for p, _ in acks.values()}
    if len(used) != PARTITIONS:
        result.fail(f"the keys landed on partitions {sorted(used)}, expected all {PARTITIONS}")

    expected = {}
    for i, (p, o) in acks.items():
        expected.setdefault(p, []).append((o, records[i]))
    for p in expected:
        expected[p].sort(key=lambda t: t[0])

    for p in range(PARTITIONS):
        exp = expected.get(p, [])
        got = read_by_partition.get(p, [])
        result.read += len(got)
        # The acknowledged offsets of a partition must be 0..n-1: each record stored once,
        # in the order produced (all records of this topic come from this run).
        offsets = [o for o, _ in exp]
        if offsets != list(range(len(exp))):
            result.fail(f"partition {p}: acknowledged offsets are not 0..{len(exp) - 1}: "
                        f"first few {offsets[:10]}")
        # Per-key order: the records of one key are in produce order within a partition.
        idx = [r.i for _, r in exp]
        if idx != sorted(idx):
            result.fail(f"partition {p}: acknowledged records are not in produce order")
        if end_offsets.get(p) != len(exp):
            result.fail(f"partition {p}: end offset {end_offsets.get(p)}, "
                        f"{len(exp)} records acknowledged")
        if len(got) != len(exp):
            result.fail(f"partition {p}: read {len(got)} records, {len(exp)} acknowledged")
        for (o, r), g in zip(exp, got):
            where = f"partition {p} offset {o} (record {r.i})"
            if g.offset != o:
                result.fail(f"{where}: read offset {g.offset} in its place")
                continue
            if g.key != r.key:
                result.fail(f"{where}: key {g.key!r}, produced {r.key!r}")
            if g.value != r.value:
                result.fail(f"{where}: value {g.value!r:.60}, produced {r.value!r:.60}")
            if g.headers != r.headers:
                result.fail(f"{where}: headers {g.headers}, produced {r.headers}")
            if g.timestamp_ms != r.timestamp_ms:
                result.fail(f"{where}: timestamp {g.timestamp_ms}, produced {r.timestamp_ms}")


class Summary:
    """Collects per-codec results and checks that are not per codec, prints them, exits."""

    def __init__(self, client):
        self.client = client
        self.results = []
        self.checks = []  # (name, ok, detail)

    def codec(self, codec, fn):
        """Runs fn(result) for one codec; an exception is a failure of that codec only."""
        result = CodecResult(codec)
        started = time.monotonic()
        try:
            fn(result)
        except Exception as e:  # noqa: BLE001 - any client error fails this codec
            result.fail(f"{type(e).__name__}: {e}")
            traceback.print_exc()
        return self._codec_done(result, started)

    async def codec_async(self, codec, fn):
        """`codec` for an async fn(result)."""
        result = CodecResult(codec)
        started = time.monotonic()
        try:
            await fn(result)
        except Exception as e:  # noqa: BLE001 - any client error fails this codec
            result.fail(f"{type(e).__name__}: {e}")
            traceback.print_exc()
        return self._codec_done(result, started)

    def _codec_done(self, result, started):
        codec = result.codec
        result.note = f"{time.monotonic() - started:.1f}s"
        self.results.append(result)
        status = "PASS" if result.ok else "FAIL"
        print(f"[{self.client}] codec {codec}: {status} ({result.produced} acknowledged, "
              f"{result.read} read, {result.note})", flush=True)
        for m in result.mismatches[:MISMATCHES_SHOWN_MAX]:
            print(f"    {m}", flush=True)
        if len(result.mismatches) > MISMATCHES_SHOWN_MAX:
            print(f"    ... and {len(result.mismatches) - MISMATCHES_SHOWN_MAX} more", flush=True)
        return result

    def check(self, name, fn):
        """Runs fn() as a named check; it passes unless it raises (AssertionError or a client
        error), whose message becomes the failure's detail."""
        try:
            return self._check_done(name, fn(), None)
        except Exception as e:  # noqa: BLE001
            return self._check_done(name, None, e)

    async def check_async(self, name, fn):
        """`check` for an async fn()."""
        try:
            return self._check_done(name, await fn(), None)
        except Exception as e:  # noqa: BLE001
            return self._check_done(name, None, e)

    def _check_done(self, name, detail, error):
        if error is None:
            detail = detail or ""
            self.checks.append((name, True, detail))
            print(f"[{self.client}] check {name}: PASS {detail}", flush=True)
            return True
        self.checks.append((name, False, f"{type(error).__name__}: {error}"))
        print(f"[{self.client}] check {name}: FAIL {type(error).__name__}: {error}", flush=True)
        traceback.print_exception(error)
        return False

    def not_run(self, name, why):
        """A check left out of this run: printed, counted neither way."""
        print(f"[{self.client}] check {name}: not run ({why})", flush=True)

    def exit(self):
        failed = [r.codec for r in self.results if not r.ok]
        failed += [n for n, ok, _ in self.checks if not ok]
        print(f"=== {self.client} summary")
        for r in self.results:
            print(f"  codec {r.codec:<6} {'PASS' if r.ok else 'FAIL'}")
        for n, ok, detail in self.checks:
            print(f"  check {n:<24} {'PASS' if ok else 'FAIL'} {detail}")
        total = len(self.results) + len(self.checks)
        print(f"{self.client}: {total - len(failed)} passed, {len(failed)} failed")
        sys.exit(1 if failed else 0)


class Failures:
    """Failed sends grouped by error message, so 2000 records failing the same way print as
    one line with a count and the first record's index."""

    def __init__(self):
        self.by_message = {}

    def add(self, i, error):
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        first, count = self.by_message.get(message, (i, 0))
        self.by_message[message] = (first, count + 1)

    def lines(self):
        return [f"{count} record(s), first record {first}: {message}"
                for message, (first, count) in self.by_message.items()]
