import os  # per-call events are kept only with a trace; it goes to os.devnull
import torch, time, zenith, torchvision, sys
torch.set_num_threads(2)
name = sys.argv[1] if len(sys.argv) > 1 else "mobilenet_v2"
m = getattr(torchvision.models, name)().eval(); xi = torch.randn(1,3,224,224)
c = torch.compile(m, backend="zenith")
with torch.no_grad():
    for _ in range(5): c(xi)
    for r in range(3):
        with zenith.profile(trace=os.devnull) as p:
            for _ in range(20): c(xi)
        evs = sorted(p.events, key=lambda e: e[4])
        k = len(evs) // 20
        calls = [evs[i*k:(i+1)*k] for i in range(20)]
        gaps = sorted(calls[i+1][0][4] - (calls[i][-1][4] + calls[i][-1][5]) for i in range(19))
        inner = sorted(sum(calls[i][j+1][4] - (calls[i][j][4] + calls[i][j][5]) for j in range(k-1)) for i in range(20))
        print(f"{k} nodes; between calls median {gaps[9]:.0f} us; gaps inside a call {inner[10]:.0f} us; first node {calls[5][0][0]} {calls[5][0][5]:.0f} us")
