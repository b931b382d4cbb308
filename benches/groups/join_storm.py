"""Ten members joining at once: how long a new group of ten takes to become Stable.

Each round starts ten confluent-kafka members (member.py processes) of a fresh group on one
10-partition topic (one partition each under librdkafka's default range assignor), with the
broker at its default group.initial.rebalance.delay.ms of 3000. The processes import the client
and create their consumers first, then wait on stdin; the round releases all ten together
("go") and measures from that moment until every member's assign callback has fired and the
ten assignments together own all ten partitions, each exactly once; it then cross-checks with
DescribeGroups (Stable, ten members, the same assignment) and counts the assign callbacks, so a
second rebalance would show. The time from spawning the processes is printed too (it adds
Python's start-up on this machine). The goal is 2 x 3000 ms + 1 s = 7 s: Kafka extends the
first delay once when members join during it. ROUNDS (default 3, env SAMSA_BENCH_ROUNDS);
prints one line per round and a min/median/max summary, and exits 1 if a round failed.
"""

import time

import groupbench as gb

MEMBERS = 10
PARTITIONS = 10
INITIAL_DELAY_MS = 3000
GOAL_S = 2 * INITIAL_DELAY_MS / 1000 + 1
# Bounds: ten Python processes starting on a small machine, and the join itself (well above
# the goal, so a miss is measured rather than cut off).
READY_TIMEOUT_S = 120
STABLE_TIMEOUT_S = 60
# After the group is stable, how long to watch for a further rebalance before describing it.
SETTLE_S = 2.0


def round_once(bootstrap, topic, r):
    group = f"bench-join-{gb.unique_suffix()}-{r}"
    names = [f"m{i}" for i in range(MEMBERS)]
    with gb.Members(bootstrap, group, topic, names) as members:
        members.wait("members ready", lambda ev: True if sum(
            e["event"] == "ready" for e in ev) == MEMBERS else None, READY_TIMEOUT_S)
        go_at = members.go()

        def stable(events):
            owned, last_t = gb.ownership(events, names, since=go_at)
            assigned = {e["name"] for e in events if e["event"] == "assign"}
            if len(assigned) == MEMBERS and gb.covers(owned, PARTITIONS) and all(owned.values()):
                return last_t, owned
            return None

        done_t, owned = members.wait("ten members own all partitions", stable, STABLE_TIMEOUT_S)
        time.sleep(SETTLE_S)
        events = members.snapshot()
        assigns = sum(e["event"] == "assign" for e in events)
        subscribed = [e["t"] for e in events if e["event"] == "subscribed"]
        state, described = gb.describe_group(bootstrap, group)
        expected = {n: sorted(p) for n, p in owned.items()}
        took = done_t - go_at
        print(f"round {r}: stable in {took:.3f} s after go ({done_t - members.spawned_at:.3f} s "
              f"after spawning; the last subscribe {max(subscribed) - go_at:.3f} s after go); "
              f"{assigns} assign callbacks; DescribeGroups: {state}, {len(described)} members",
              flush=True)
        if state != "STABLE" or described != expected:
            raise RuntimeError(f"DescribeGroups says {state} {described}, callbacks {expected}")
        if assigns != MEMBERS:
            raise RuntimeError(f"{assigns} assign callbacks for {MEMBERS} members: a rebalance "
                               "happened after the group was stable")
        return took


def main():
    gb.run_rounds("10 members joining -> Stable", round_once, 3, PARTITIONS, GOAL_S)


if __name__ == "__main__":
    main()
