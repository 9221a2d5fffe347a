# conv2d (+ bn + ReLU) alone at ResNet-50 shapes, Zenith kernel time (zenith.profile), batch N:
#   .venv/bin/python conv_shapes.py N [indices]
import sys, time, torch, zenith
torch.set_num_threads(2)
N = int(sys.argv[1])
shapes = [  # C, OC, H, k, s
 (3, 64, 224, 7, 2), (64, 256, 56, 1, 1), (256, 64, 56, 1, 1), (64, 64, 56, 3, 1),
 (256, 128, 56, 1, 1), (128, 128, 56, 3, 2), (256, 512, 56, 1, 2), (128, 512, 28, 1, 1),
 (512, 128, 28, 1, 1), (128, 128, 28, 3, 1), (256, 256, 28, 3, 2), (256, 1024, 14, 1, 1),
 (1024, 256, 14, 1, 1), (256, 256, 14, 3, 1), (512, 512, 14, 3, 2), (512, 2048, 7, 1, 1),
 (2048, 512, 7, 1, 1), (512, 512, 7, 3, 1)]
if len(sys.argv) > 2: shapes = [shapes[int(i)] for i in sys.argv[2].split(",")]
for C, OC, H, k, s in shapes:
    torch._dynamo.reset()
    m = torch.nn.Sequential(torch.nn.Conv2d(C, OC, k, s, k // 2, bias=False), torch.nn.BatchNorm2d(OC), torch.nn.ReLU()).eval()
    x = torch.randn(N, C, H, H)
    f = zenith.compile(m)
    with torch.no_grad():
        for _ in range(3): f(x)
        best = []
        for _ in range(5):
            with zenith.profile() as p:
                for _ in range(3): f(x)
            best.append(p.table["conv2d"][1] / 3)
        y = f(x); ref = m(x)
    t = sorted(best)[2]
    OH = (H + 2 * (k // 2) - k) // s + 1
    fl = 2 * N * OC * OH * OH * C * k * k
    print(f"{C:5d}->{OC:5d} {H:4d} k{k} s{s}  {t*1e3:8.3f} ms  {fl/t/1e9:6.1f} GFLOP/s  err {(y-ref).abs().max().item():.1e}", flush=True)
