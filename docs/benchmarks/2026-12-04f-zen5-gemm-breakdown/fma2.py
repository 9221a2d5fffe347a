import threading, zenith._C as C, statistics
def one():
    return next(r["gmacs"] for r in C.isa_mac_rates() if r["name"] == "fp32 fma (avx512)")
for r in range(5):
    a = one()
    out = [0, 0]
    def w(i): out[i] = one()
    ts = [threading.Thread(target=w, args=(i,)) for i in range(2)]
    [t.start() for t in ts]; [t.join() for t in ts]
    print(f"alone {a:.1f}  together {out[0]:.1f} {out[1]:.1f}")
