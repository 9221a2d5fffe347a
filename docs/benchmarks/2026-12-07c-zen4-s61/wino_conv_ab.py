"""One 3x3 stride-1 conv (padding 1, + bias), PyTorch against Zenith with conv2d's
Winograd in NCHW (ZENITH_CONV_NCHWC_WINOGRAD=0 while that copy compiles) and over the
blocked layout, in one process, calls alternating in rounds: constant filters (a frozen
nn.Conv2d, inference) and filters as an input (as in a training step). Median ms and
per-round ratios blocked / NCHW, median [p25, p75]. Usage: wino_conv_ab.py [ROUNDS]."""
import os
import statistics as st
import sys
import time

import torch
import torch.nn.functional as F

import zenith

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
SHAPES = [(8, 512, 7), (8, 256, 14), (8, 128, 28), (8, 64, 56), (1, 512, 7), (1, 256, 14), (1, 128, 28),
          (1, 64, 56)]


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def compiled_conv():
    """F.conv2d compiled through a function with a code object of its own (Dynamo caches
    graphs per code object, so the two arms would otherwise share one)."""
    def f(x, w, b):
        return F.conv2d(x, w, b, padding=1)

    f.__code__ = f.__code__.replace()
    return torch.compile(f, backend="zenith")


def ratio(num, den):
    r = sorted(a / b for a, b in zip(num, den))
    return f"{st.median(r):.3f} [{r[len(r) // 4]:.3f}, {r[3 * len(r) // 4]:.3f}]"


def main():
    torch.manual_seed(0)
    print(f"{torch.get_num_threads()} threads, {ROUNDS} rounds; median ms")
    for n, c, h in SHAPES:
        # Dynamo marks sizes dynamic for a code it has seen with other shapes (code objects
        # compare by content), and the two arms then shared one graph: start afresh.
        torch._dynamo.reset()
        x = torch.randn(n, c, h, h)
        m = torch.nn.Conv2d(c, c, 3, padding=1).eval()
        w, b = m.weight.detach().clone(), m.bias.detach().clone()
        with torch.no_grad():
            want = m(x)
        runs = {"torch": lambda: m(x)}
        for label, env in (("nchw", "0"), ("blocked", "1")):
            os.environ["ZENITH_CONV_NCHWC_WINOGRAD"] = env  # read when a graph is prepared
            fz = zenith.freeze(m)
            fn = compiled_conv()
            with torch.no_grad():
                torch.testing.assert_close(fz(x), want, rtol=1e-3, atol=1e-3)
                torch.testing.assert_close(fn(x, w, b), want, rtol=1e-3, atol=1e-3)
            runs[f"{label} const"] = (lambda fz=fz: fz(x))
            runs[f"{label} input"] = (lambda fn=fn: fn(x, w, b))
        t = {k: [] for k in runs}
        with torch.no_grad():
            for _ in range(3):
                for f in runs.values():
                    f()
            for _ in range(ROUNDS):
                for k, f in runs.items():
                    t[k].append(timed(f))
        med = {k: st.median(v) * 1e3 for k, v in t.items()}
        print(f"N{n} C{c} {h}x{h}: torch {med['torch']:.2f} | const nchw {med['nchw const']:.2f} blocked "
              f"{med['blocked const']:.2f} ratio {ratio(t['blocked const'], t['nchw const'])} | input nchw "
              f"{med['nchw input']:.2f} blocked {med['blocked input']:.2f} ratio "
              f"{ratio(t['blocked input'], t['nchw input'])}")


if __name__ == "__main__":
    main()
