"""One model file for every size (symbolic dims) against a file per size, 2 threads.

For each workload, files written by zenith.export: one with dynamic_shapes (batch, and for
MiniLM the sequence length, symbolic) and one static file per measured shape. For the
CNNs the symbolic file is loaded twice: as Zenith compiles it by default, and with
ZENITH_NCHWC=0 (NCHW convs: the blocked layout off; read at load). (The first run,
dynamic_file_before.txt, had the second arm ZENITH_NCHWC=1, when the blocked layout took
static batches only by default.) In one
process, rounds alternating the arms' order, 10 calls per arm per round (the round's
median); every arm's output checked against eager. Usage: dynamic_file.py [ROUNDS].
Prints medians (ms) and per-round ratios to the static file, median [p25, p75]."""
import os
import statistics as st
import sys
import tempfile
import time
from pathlib import Path

import torch
import torchvision
from torch.export import Dim

import zenith
from zenith.demo import load_minilm

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 8
ONLY = set(sys.argv[2:]) or {"resnet50", "mobilenet_v2", "minilm"}
torch.set_num_threads(2)
zenith._C.set_num_threads(2)
torch.manual_seed(0)
tmp = Path(tempfile.mkdtemp())


def first(o):
    return o if isinstance(o, torch.Tensor) else o[0]


def timed(fn, args, n=10):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(*args)
        ts.append((time.perf_counter() - t0) * 1e3)
    return st.median(ts)


def quartiles(xs):
    q = st.quantiles(xs, n=4)
    return f"{st.median(xs):.3f} [{q[0]:.3f}, {q[2]:.3f}]"


def export(name, model, args, **kw):
    t0 = time.perf_counter()
    m = zenith.export(model, args, tmp / f"{name}.zenith", **kw)
    return m, time.perf_counter() - t0


def load_nchw(path):
    os.environ["ZENITH_NCHWC"] = "0"
    try:
        return zenith.load(path)
    finally:
        del os.environ["ZENITH_NCHWC"]


def cnn(name, model, batches):
    x = torch.randn(max(batches), 3, 224, 224)
    dyn, secs = export(name, model, (x[:2].contiguous(),), dynamic_shapes=({0: Dim("batch", max=64)},))
    print(f"{name}: symbolic file exported in {secs:.2f} s; inputs {dyn.inputs}")
    arms = {"symbolic": dyn, "symbolic, NCHWC=0": load_nchw(dyn.path)}
    for b in batches:
        args = (x[:b].contiguous(),)
        static, _ = export(f"{name}_b{b}", model, args)
        yield f"{name} b{b}", model, args, dict(arms, static=static)


def minilm(shapes):
    tok, m = load_minilm()
    text = open("/usr/share/common-licenses/GPL-3").read().split()

    def batch(b, s):
        enc = tok([" ".join(text[k * 50:k * 50 + 400]) for k in range(b)], max_length=s, truncation=True,
                  padding="max_length", return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    bd, sd = Dim("batch", max=64), Dim("seq", max=512)
    dyn, secs = export("minilm", m, batch(2, 64), dynamic_shapes=({0: bd, 1: sd}, {0: bd, 1: sd}))
    print(f"minilm: symbolic file exported in {secs:.2f} s; inputs {dyn.inputs}")
    for b, s in shapes:
        args = batch(b, s)
        static, _ = export(f"minilm_b{b}_s{s}", m, args)
        yield f"minilm b{b} s{s} (real weights)", m, args, {"symbolic": dyn, "static": static}


def workloads():
    if "resnet50" in ONLY:
        yield from cnn("resnet50", torchvision.models.resnet50().eval(), (1, 4))
    if "mobilenet_v2" in ONLY:
        yield from cnn("mobilenet_v2", torchvision.models.mobilenet_v2().eval(), (1, 4))
    if "minilm" in ONLY:
        yield from minilm(((1, 32), (1, 128), (4, 64)))


for name, model, args, arms in workloads():
    with torch.no_grad():
        ref = first(model(*args))
        for arm, fn in arms.items():
            err = (first(fn(*args)) - ref).abs().max().item()
            assert err <= 1e-3 * max(1.0, ref.abs().max().item()), (name, arm, err)
        per = {a: [] for a in arms}
        for r in range(ROUNDS):
            for a in (list(arms) if r % 2 == 0 else list(reversed(arms))):
                per[a].append(timed(arms[a], args))
    print(name)
    for a in arms:
        ratio = "" if a == "static" else f"   / static per round {quartiles([x / s for x, s in zip(per[a], per['static'])])}"
        print(f"  {a:18s} median {st.median(per[a]):8.3f} ms{ratio}")
