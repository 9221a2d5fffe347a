import sys, time, torch, torchvision, collections, re
import openvino as ov
torch.manual_seed(0)
B = int(sys.argv[1]) if len(sys.argv) > 1 else 1
name = sys.argv[2] if len(sys.argv) > 2 else "resnet50"
torch.set_num_threads(2)
m = getattr(torchvision.models, name)().eval()
x = torch.randn(B, 3, 224, 224)
convs = {}
def mk(n):
    def hook(mod, inp, out):
        convs[n] = (tuple(inp[0].shape), tuple(out.shape), mod.kernel_size, mod.stride, mod.groups)
    return hook
hs = [mm.register_forward_hook(mk(n)) for n, mm in m.named_modules() if isinstance(mm, torch.nn.Conv2d)]
with torch.no_grad(): m(x)
for h in hs: h.remove()
with torch.no_grad():
    om = ov.convert_model(m, example_input=(x,))
cm = ov.compile_model(om, "CPU", {"INFERENCE_NUM_THREADS": 2, "INFERENCE_PRECISION_HINT": "f32",
                                  "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": "YES"})
req = cm.create_infer_request()
feed = [x.numpy()]
for _ in range(5): req.infer(feed)
ts = []
per = collections.defaultdict(list)
for _ in range(15):
    t = time.perf_counter(); req.infer(feed); ts.append(time.perf_counter() - t)
    for pi in req.get_profiling_info():
        per[(pi.node_name, pi.node_type, pi.exec_type)].append(pi.real_time.total_seconds() * 1e6)
ts.sort(); print("median ms", ts[len(ts)//2] * 1e3)
rt = cm.get_runtime_model()
shp = {}
for op in rt.get_ordered_ops():
    try:
        shp[op.get_friendly_name()] = (tuple(op.get_input_partial_shape(0).to_shape()), tuple(op.get_output_partial_shape(0).to_shape()))
    except Exception: pass
bysig = collections.defaultdict(list)
for n, (ins, outs, k, s, g) in convs.items():
    bysig[(ins[1], outs[1], outs[2], k[0] == 1)].append(n)
rows = collections.defaultdict(lambda: [0.0, 0.0, 0, set()])
unmatched = 0
for (nn, nt, et), d in per.items():
    d = sorted(d)[len(d)//2]
    if d == 0: continue
    if nt == "Convolution" or "Convolution" in nt:
        mod = None
        if nn in shp:
            ins_, outs_ = shp[nn]
            cands = bysig.get((ins_[1], outs_[1], outs_[2], "1x1" in et), [])
            if cands: mod = cands[0]
        if mod in convs:
            ins, outs, k, s, g = convs[mod]
            fl = 2*outs[0]*outs[1]*outs[2]*outs[3]*ins[1]//g*k[0]*k[1]
            key = f"{ins[1]:>4}->{outs[1]:>4} k{k[0]} s{s[0]} {outs[2]}x{outs[3]}" + (" dw" if g > 1 else "")
            rows[key][0] += d; rows[key][1] += fl; rows[key][2] += 1; rows[key][3].add(et); continue
        unmatched += 1
        print("unmatched", nn, nt, et, d)
    rows[nt][0] += d; rows[nt][2] += 1; rows[nt][3].add(et)
tot = sum(r[0] for r in rows.values())
for k, (d, fl, n, e) in sorted(rows.items(), key=lambda kv: -kv[1][0]):
    print(f"{k:<32} n={n:<3} {d/1e3:8.3f} ms {100*d/tot:5.1f}%  " + (f"{fl/d/1e3:7.1f} GFLOP/s" if fl else "") + " " + ",".join(sorted(e)))
print("total layer ms", tot/1e3)
