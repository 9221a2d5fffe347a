# One quantized linear layer [M=128, K] -> N, frozen, by rows (ZENITH_EXP_BYROWS=1) against by columns, per shape and
# scheme; the input comes from a LayerNorm so that it is fresh each call. python byrows_shapes.py [rounds]
import os, random, statistics, sys, time
import torch, zenith
torch.manual_seed(0); torch.set_num_threads(2)
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 60
shapes = [(384, 384), (384, 1152), (384, 1536), (1536, 384), (768, 768), (768, 2304), (768, 3072), (3072, 768)]
for scheme in ("int8-dynamic", "int8-static"):
    for K, N in shapes:
        m = torch.nn.Sequential(torch.nn.LayerNorm(K), torch.nn.Linear(K, N)).eval()
        x = torch.randn(1, 128, K)
        kw = dict(calibration=[(torch.randn(1, 128, K),) for _ in range(2)], method="minmax") if scheme == "int8-static" else {}
        zenith.quantize(m, scheme, **kw)
        f = zenith.freeze(m)
        def call(k):
            if k == "new": os.environ["ZENITH_EXP_BYROWS"] = "1"
            else: os.environ.pop("ZENITH_EXP_BYROWS", None)
            t = time.perf_counter(); f(x); return time.perf_counter() - t
        with torch.no_grad():
            for _ in range(5): call("new"); call("old")
            res = {"new": [], "old": []}
            for _ in range(rounds):
                for k in random.sample(list(res), 2): res[k].append(call(k))
        r = sorted(a / b for a, b in zip(res["new"], res["old"]))
        print(f"{scheme:13s} K {K:5d} N {N:5d} weight {K*N/2**20:5.2f} MiB: rows {statistics.median(res['new'])*1e6:7.1f} us, "
              f"cols {statistics.median(res['old'])*1e6:7.1f} us, per round {statistics.median(r):.3f} [{r[len(r)//10]:.3f}, {r[-len(r)//10-1]:.3f}]", flush=True)
