"""The floor under a synced OffsetCommit on this disk: small appends, each followed by fdatasync.

Appends WRITES (default 5000) records of 128 bytes (about one offset-commit record batch) to a
file in the directory given as the only argument (the broker's data directory, so the same
file system), each followed by os.fdatasync, paced at RATE per second (default 1000, the
commit benchmark's rate), and prints the p50/p99/p99.9/max latency of write + fdatasync in
milliseconds as a line of text and one JSON line. The file is removed afterwards. Run it with
the broker stopped, so the two do not compete for the disk.
"""

import json
import os
import sys
import time

WRITE_BYTES = 128


def percentile(sorted_values, q):
    rank = min(len(sorted_values), max(1, int(-(-q * len(sorted_values) // 1))))
    return sorted_values[rank - 1]


def main():
    if len(sys.argv) != 2:
        print("usage: sync_reference.py DIR", file=sys.stderr)
        sys.exit(2)
    writes = int(os.environ.get("SAMSA_BENCH_SYNC_WRITES", "5000"))
    rate = int(os.environ.get("SAMSA_BENCH_SYNC_RATE", "1000"))
    path = os.path.join(sys.argv[1], "sync-reference.bin")
    chunk = b"\x5a" * WRITE_BYTES
    lat_ms = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.monotonic()
        for i in range(writes):
            due = start + i / rate
            left = due - time.monotonic()
            if left > 0:
                time.sleep(left)
            t0 = time.monotonic()
            os.write(fd, chunk)
            os.fdatasync(fd)
            lat_ms.append((time.monotonic() - t0) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    lat_ms.sort()
    figures = {name: round(percentile(lat_ms, q), 3)
               for name, q in (("p50", 0.5), ("p99", 0.99), ("p99_9", 0.999), ("max", 1.0))}
    print(f"{writes} x {WRITE_BYTES} B write + fdatasync at {rate}/s: "
          + ", ".join(f"{k} {v:.3f} ms" for k, v in figures.items()))
    print(json.dumps({"sync_reference_ms": figures}))


if __name__ == "__main__":
    main()
