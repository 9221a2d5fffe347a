# The per-node profile this folder's ResNet-50 scripts share: a frozen model's kernel time per key (zenith.profile,
# summed over a call), the median over `calls` calls after 3 warm ones. key(op, node, shape) picks what to sum by.
import collections, statistics, torch, zenith


def node_medians(f, x, calls, key):
    per = collections.defaultdict(list)
    with torch.no_grad():
        for _ in range(3): f(x)
        for _ in range(calls):
            with zenith.profile(trace="/dev/null") as p:
                f(x)
            call = collections.defaultdict(float)
            for op, node, graph, tid, ts, dur, shape in p.events:
                call[key(op, node, tuple(shape))] += dur
            for k, v in call.items(): per[k].append(v)
    return {k: statistics.median(v) for k, v in per.items()}
