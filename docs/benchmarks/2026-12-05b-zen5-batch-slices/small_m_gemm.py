import torch, zenith, time, statistics, sys
torch.set_num_threads(2)
N, K = int(sys.argv[1]), int(sys.argv[2])
lin = torch.nn.Linear(K, N).eval()
fs = {}
with torch.no_grad():
  for M in [1,2,4,5,6,8,12,16,24,32,64]:
    x = torch.randn(M, K); f = zenith.freeze(lin)
    for _ in range(20): f(x)
    t=[]
    for _ in range(300):
        t0=time.perf_counter(); f(x); t.append(time.perf_counter()-t0)
    med = statistics.median(t)*1e6
    print(M, "%.1f us  %.0f GFLOP/s" % (med, 2*M*N*K/med/1e3))
