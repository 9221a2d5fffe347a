"""torch.compile(dynamic=True) of a transformer, whose GEMM rows (batch x length) are
symbolic: with the sibling and hand-off passes taking symbolic rows (this session) against
both passes off (ZENITH_ADDMM_SIBLINGS=0, ZENITH_GEMM_HANDOFF=0: what a symbolic graph
got before, when the passes took static rows only). BERT-base config (12 layers, random
init, nn.Linear projections) forward, 2 threads; lengths 3 (rows too few for the weight-rows
driver: the fallbacks), 16 and 128. Rounds alternate the arms' order, 10 calls per arm per
round; outputs checked against eager. Usage: symbolic_rows_ab.py [ROUNDS]."""
import copy
import os
import statistics as st
import sys
import time

import torch
import transformers

import zenith  # noqa: F401  (registers the backend)
from zenith.backend import collect_reports

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 8
torch.set_num_threads(2)
torch.manual_seed(0)
model = transformers.BertModel(transformers.BertConfig()).eval()


def compiled(env):
    # A backend callable of its own per arm: Dynamo guards on the backend, so the arms'
    # copies (one code object) do not share a compiled graph.
    zenith_backend = torch._dynamo.lookup_backend("zenith")
    m = copy.deepcopy(model)
    fn = torch.compile(m, backend=lambda gm, ex: zenith_backend(gm, ex), dynamic=True)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with torch.no_grad(), collect_reports() as reports:
            for L in (3, 16, 128):  # each length compiles (or re-plans) with env in force
                fn(torch.randint(0, 30000, (1, L)))
        ops = {}
        for r in reports:
            for op, n in r.zenith_ops.items():
                ops[op] = ops.get(op, 0) + n
        print(f"{env or 'default'}: {len(reports)} graph(s), addmm {ops.get('addmm', 0)}, "
              f"addmm_parts {ops.get('addmm_parts', 0)}")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return fn


arms = {"symbolic rows fused": compiled({}),
        "passes off": compiled({"ZENITH_ADDMM_SIBLINGS": "0", "ZENITH_GEMM_HANDOFF": "0"})}
for L in (3, 16, 128):
    ids = torch.randint(0, 30000, (1, L))
    with torch.no_grad():
        ref = model(ids).last_hidden_state
        for a, fn in arms.items():
            err = (fn(ids).last_hidden_state - ref).abs().max().item()
            assert err <= 1e-3 * max(1.0, ref.abs().max().item()), (a, L, err)
        per = {a: [] for a in arms}
        for r in range(ROUNDS):
            for a in (list(arms) if r % 2 == 0 else list(reversed(arms))):
                ts = []
                for _ in range(10):
                    t0 = time.perf_counter()
                    arms[a](ids)
                    ts.append((time.perf_counter() - t0) * 1e3)
                per[a].append(st.median(ts))
    ratio = [x / y for x, y in zip(per["symbolic rows fused"], per["passes off"])]
    q = st.quantiles(ratio, n=4)
    print(f"length {L}: fused {st.median(per['symbolic rows fused']):.3f} ms, off {st.median(per['passes off']):.3f} ms, "
          f"fused / off per round {st.median(ratio):.3f} [{q[0]:.3f}, {q[2]:.3f}]")
