"""SIGKILL -> reassignment: how long the survivors of a killed member take to own its partitions.

Each round creates a fresh group of three confluent-kafka members (member.py processes,
session.timeout.ms=6000, heartbeat.interval.ms=1000, librdkafka's default eager
range/roundrobin assignors) on one 6-partition topic, waits until their assign callbacks
together own all six partitions, each exactly once, and DescribeGroups says Stable, lets the
group sit for SETTLE_S, then SIGKILLs one member (no LeaveGroup). It measures the time from the
kill to the moment the two survivors' assign callbacks (each after the kill) together own all
six partitions, each exactly once, and also when the survivors' revoke callbacks fired (the
coordinator noticing the expiry and the rebalance starting). The goal is session timeout +
heartbeat interval + 1 s = 8 s. ROUNDS (default 7, env SAMSA_BENCH_ROUNDS) rounds; prints one
line per round and a min/median/max summary, and exits 1 if a round failed.
"""

import time

import groupbench as gb

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
GOAL_S = (SESSION_TIMEOUT_MS + HEARTBEAT_MS) / 1000 + 1
# Bounds: the initial join (3 s default initial delay plus the join itself), and the
# reassignment (well above the goal, so a miss is measured rather than cut off).
STABLE_TIMEOUT_S = 60
REASSIGN_TIMEOUT_S = 60
# How long the group sits stable before the kill.
SETTLE_S = 2.0


def round_once(bootstrap, topic, r):
    group = f"bench-kill-{gb.unique_suffix()}-{r}"
    names = [f"m{i}" for i in range(3)]
    args = ["--no-wait", "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
            "--heartbeat-interval-ms", str(HEARTBEAT_MS)]
    with gb.Members(bootstrap, group, topic, names, args) as members:
        def stable(events):
            owned, last_t = gb.ownership(events, names)
            if gb.covers(owned, PARTITIONS) and all(owned.values()):
                return last_t
            return None

        stable_t = members.wait("three members own all partitions", stable, STABLE_TIMEOUT_S)
        state, described = gb.describe_group(bootstrap, group)
        if state != "STABLE" or len(described) != 3:
            raise RuntimeError(f"before the kill: DescribeGroups says {state} {described}")
        time.sleep(SETTLE_S)
        if gb.ownership(members.snapshot(), names)[1] != stable_t:
            raise RuntimeError("the group rebalanced again while it should have been stable")
        victim, survivors = names[0], names[1:]
        killed_at = members.kill(victim)

        def reassigned(events):
            after = [e for e in events if e["t"] >= killed_at]
            owned, last_t = gb.ownership(events, survivors, since=killed_at)
            if gb.covers(owned, PARTITIONS) and all(owned.values()):
                revokes = [e["t"] for e in after if e["event"] in ("revoke", "lost")
                           and e["name"] in survivors]
                return last_t, (min(revokes) if revokes else None), owned
            return None

        done_t, revoke_t, owned = members.wait("survivors own all partitions", reassigned,
                                               REASSIGN_TIMEOUT_S)
        state, described = gb.describe_group(bootstrap, group)
        took = done_t - killed_at
        revoke = f"{revoke_t - killed_at:.3f} s" if revoke_t is not None else "none"
        print(f"round {r}: reassigned in {took:.3f} s (first survivor revoke after {revoke}); "
              f"owned {dict((n, sorted(p)) for n, p in owned.items())}; "
              f"DescribeGroups after: {state} {described}", flush=True)
        if state != "STABLE" or sorted(described) != survivors:
            raise RuntimeError(f"after the reassignment DescribeGroups says {state} {described}")
        return took


def main():
    gb.run_rounds("SIGKILL -> reassignment", round_once, 7, PARTITIONS, GOAL_S)


if __name__ == "__main__":
    main()
