#!/usr/bin/python3
"""Self time per op of libtorch profiler traces (`eaglet train-draft --profile PREFIX` writes PREFIX.stepN), so that
nested ops (aten::linear inside autograd nodes) are not counted twice.

    profile_summary.py TRACE [TRACE...]   -> a table: op, self ms per step, share, calls per step
"""
import collections
import json
import sys


def self_times(events):
    """Events of one thread, as (start, end, name): each one's time minus its children's."""
    out = collections.Counter()
    calls = collections.Counter()
    stack = []  # (end, name, child time)
    for start, end, name in sorted(events, key=lambda e: (e[0], -e[1])):
        while stack and stack[-1][0] <= start:
            s_end, s_name, s_child, s_start = stack.pop()
            out[s_name] += (s_end - s_start) - s_child
            if stack:
                stack[-1] = (stack[-1][0], stack[-1][1], stack[-1][2] + (s_end - s_start), stack[-1][3])
        stack.append((end, name, 0.0, start))
        calls[name] += 1
    while stack:
        s_end, s_name, s_child, s_start = stack.pop()
        out[s_name] += (s_end - s_start) - s_child
        if stack:
            stack[-1] = (stack[-1][0], stack[-1][1], stack[-1][2] + (s_end - s_start), stack[-1][3])
    return out, calls


def main(paths):
    total, calls = collections.Counter(), collections.Counter()
    for path in paths:
        trace = json.load(open(path))
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        threads = collections.defaultdict(list)
        for e in events:
            if e.get("ph") == "X":
                threads[e.get("tid")].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
        for evs in threads.values():
            t, c = self_times(evs)
            total.update(t)
            calls.update(c)
    steps = len(paths)
    whole = sum(total.values())
    print(f"{'op':<48} {'self ms/step':>12} {'share':>7} {'calls/step':>10}")
    for name, us in total.most_common(25):
        print(f"{name[:48]:<48} {us / 1000 / steps:>12.2f} {100 * us / whole:>6.1f}% {calls[name] / steps:>10.0f}")
    print(f"{'all ops':<48} {whole / 1000 / steps:>12.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
