# Per-node times of ResNet-50 fp32 and int8-static side by side (zenith.freeze, one process,
# the two profiled in alternating rounds, median per node): python q_pernode.py <batch> [rounds]
# The nodes pair up by position (the int8 graph has the fp32 graph's nodes; an int8 conv
# writing codes shows its output as [N, H, W, C]).
import os, sys, copy, collections, torch, torchvision, zenith
torch.manual_seed(0); torch.set_num_threads(2)
B = int(sys.argv[1]); rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
m = torchvision.models.resnet50().eval(); x = torch.randn(B, 3, 224, 224)
cal = [(torch.randn(B, 3, 224, 224),) for _ in range(4)]
q = zenith.quantize(copy.deepcopy(m), "int8-static", calibration=cal)
fs = {"fp32": zenith.freeze(m), "int8": zenith.freeze(q)}
times = {k: collections.defaultdict(list) for k in fs}; info = {k: {} for k in fs}
with torch.no_grad():
    for f in fs.values():
        for _ in range(3): f(x)
    for r in range(rounds):
        for k, f in fs.items():
            with zenith.profile(trace=os.devnull) as p:
                f(x)
            for op, node, graph, tid, ts, dur, shape in p.events:
                times[k][node].append(dur); info[k][node] = (op, tuple(shape))
med = {k: [(info[k][n], sorted(d)[len(d) // 2] / 1e3) for n, d in sorted(times[k].items())] for k in fs}
a, b = med["fp32"], med["int8"]
print(f"nodes fp32 {len(a)} int8 {len(b)}; total fp32 {sum(t for _, t in a):.2f} ms int8 {sum(t for _, t in b):.2f} ms")
for (ia, ta), (ib, tb) in zip(a, b):
    if max(ta, tb) > 0.2:
        print(f"{ia[0]:<14} {str(ia[1]):<24} fp32 {ta:7.3f}  {ib[0]:<14} {str(ib[1]):<24} int8 {tb:7.3f}  {tb / ta:5.2f}x")
