"""zenith.load_gguf on damaged files: a small Llama GGUF (every block type the loader
runs, written as in tests/python/quant/test_gguf.py), then mutants: cut at random
points, random bytes overwritten in the header and tensor-info region, single bytes
flipped anywhere, and 8-byte counts / lengths / offsets set to huge or odd values. Each
mutant is loaded (and, if it loads, run on 3 tokens) in a forked child with a time and
memory limit. A clean Python exception or a finished run is fine; a signal, a hang or
an allocation past the limit is a finding."""
import os
import random
import resource
import signal
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../tests/python/quant"))
import torch  # noqa: E402

import zenith  # noqa: E402
from test_gguf import write_llama_gguf  # noqa: E402

torch.set_num_threads(1)
tmp = tempfile.mkdtemp()
good_path = os.path.join(tmp, "good.gguf")
write_llama_gguf(good_path)
good = open(good_path, "rb").read()
print(f"good file {len(good)} bytes")
rng = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 300
# where the header ends: the first tensor data is aligned after the tensor infos
head = min(len(good), 12000)


def mutate(kind):
    b = bytearray(good)
    if kind == "cut":
        return bytes(b[:rng.randrange(0, len(b))])
    if kind == "header-bytes":
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(0, head)] = rng.randrange(256)
    elif kind == "flip-anywhere":
        i = rng.randrange(0, len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif kind == "u64-field":
        i = rng.randrange(8, head - 8)
        v = rng.choice([2 ** 63 - 1, 2 ** 64 - 1, 2 ** 40, 2 ** 32, 0, 1, 7, 255, 65536])
        b[i:i + 8] = v.to_bytes(8, "little")
    elif kind == "u32-field":
        i = rng.randrange(8, head - 4)
        v = rng.choice([2 ** 32 - 1, 2 ** 31, 0, 1, 3, 31, 1000])
        b[i:i + 4] = v.to_bytes(4, "little")
    return bytes(b)


def child(path):
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    try:
        model, tok = zenith.load_gguf(path)
        with torch.no_grad():
            out = model(torch.tensor([[1, 5, 7]])).logits
        os._exit(10 if torch.isfinite(out).all() else 11)
    except MemoryError:
        os._exit(3)
    except BaseException as e:
        with open(os.path.join(tmp, "errors.txt"), "a") as f:
            f.write(f"{type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}\n")
        os._exit(2)


counts = {}
findings = []
for k in range(N):
    kind = rng.choice(["cut", "header-bytes", "flip-anywhere", "u64-field", "u32-field"])
    data = mutate(kind)
    path = os.path.join(tmp, "m.gguf")
    with open(path, "wb") as f:
        f.write(data)
    pid = os.fork()
    if pid == 0:
        child(path)
    deadline = 60
    for _ in range(deadline * 10):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        import time
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = None
    if status is None:
        outcome = "hang"
    elif os.WIFSIGNALED(status):
        outcome = f"signal {os.WTERMSIG(status)}"
    else:
        outcome = {10: "loaded, ran", 11: "loaded, non-finite logits", 2: "clean error", 3: "MemoryError"}.get(
            os.WEXITSTATUS(status), f"exit {os.WEXITSTATUS(status)}")
    counts[outcome] = counts.get(outcome, 0) + 1
    if outcome.startswith("signal") or outcome in ("hang", "MemoryError"):
        keep = os.path.join(tmp, f"finding-{k}.gguf")
        os.rename(path, keep)
        findings.append((k, kind, outcome, keep))
print("outcomes:", counts)
import collections, re  # noqa: E401
errs = collections.Counter(re.sub(r"\d+", "N", line.strip()) for line in open(os.path.join(tmp, "errors.txt")))
print("errors by kind:")
for e, c in errs.most_common():
    print(f"  {c:4d}  {e}")
for f in findings:
    print("  finding:", f)
