"""A model file run by the C++ runtime against the same model in Python, 2 threads.

In one process, rounds alternating the arms (10 calls each, the round's median per arm):
eager (torch.no_grad), zenith.freeze, and zenith.load (the C++ Model, through its binding).
Then the zenith-run binary (no Python) in ROUNDS separate processes, each timing 100 calls
after 3 warm-up calls, its median printed. Every arm's output is checked against eager's
first. Usage: file_runtime.py [ROUNDS]. Prints medians (ms) and per-round ratios with
their 25th / 75th percentiles."""
import statistics as st
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torchvision
from safetensors.torch import save_file

import zenith
from zenith.demo import load_minilm
from zenith.model_file import RUN_BINARY

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
torch.set_num_threads(2)
zenith._C.set_num_threads(2)
torch.manual_seed(0)


def workloads():
    yield "resnet50 b1", torchvision.models.resnet50().eval(), (torch.randn(1, 3, 224, 224),)
    yield "mobilenet_v2 b1", torchvision.models.mobilenet_v2().eval(), (torch.randn(1, 3, 224, 224),)
    tok, m = load_minilm()
    text = open("/usr/share/common-licenses/GPL-3").read().split()
    batch = tok([" ".join(text[:400])], max_length=128, truncation=True, padding="max_length", return_tensors="pt")
    yield "minilm s128 (real weights)", m, (batch["input_ids"], batch["attention_mask"])


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


tmp = Path(tempfile.mkdtemp())
for name, model, args in workloads():
    path = tmp / "m.zenith"
    t0 = time.perf_counter()
    loaded = zenith.export(model, args, path)
    export_s = time.perf_counter() - t0
    frozen = zenith.freeze(model)
    with torch.no_grad():
        ref = first(model(*args))
        arms = {"eager": lambda *a: model(*a), "freeze": frozen, "load": loaded}
        for arm, fn in arms.items():
            err = (first(fn(*args)) - ref).abs().max().item()
            assert err <= 1e-3 * max(1.0, ref.abs().max().item()), (arm, err)
        per = {a: [] for a in arms}
        for r in range(ROUNDS):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for a in order:
                per[a].append(timed(arms[a], args))
    save_file({n: t.contiguous() for (n, _, _), t in zip(loaded.inputs, args)}, tmp / "in.safetensors")
    binary = []
    for r in range(ROUNDS):
        out = subprocess.run([str(RUN_BINARY), path, "--input", tmp / "in.safetensors", "--threads", "2",
                              "--iterations", "100"], capture_output=True, text=True, check=True, env={}).stdout
        binary.append(float(out.split("median ")[1].split(" ms")[0]))
    print(f"{name}: export {export_s:.2f} s, file {path.stat().st_size / 1e6:.1f} MB")
    for a in arms:
        print(f"  {a:8s} median {st.median(per[a]):8.3f} ms")
    print(f"  zenith-run (separate processes) median {st.median(binary):8.3f} ms over {ROUNDS} runs "
          f"[{min(binary):.3f} .. {max(binary):.3f}]")
    print(f"  load / freeze per round {quartiles([l / f for l, f in zip(per['load'], per['freeze'])])}")
    print(f"  load / eager per round  {quartiles([l / e for l, e in zip(per['load'], per['eager'])])}")
