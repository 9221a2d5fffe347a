"""Tensors past 2^31 elements through compiled graphs (int32 index overflow): uint8
elementwise over 2^31 + 77 values, an embedding table of 2^31 + 3072 floats read at its
last rows, a row sum over two rows of 2^30 + 5 floats, a strided slice past 2^31. Only
a few results are compared (whole eager copies would not fit in 24 GiB)."""
import gc
import torch
import torch.nn.functional as F
import zenith

torch.set_num_threads(2)
ok = True


def report(name, good, extra=""):
    global ok
    ok &= bool(good)
    print(f"{name}: {'ok' if good else 'WRONG'} {extra}", flush=True)


N = 2 ** 31 + 77
x = torch.empty(N, dtype=torch.uint8)
x[:] = 7
x[-100:] = torch.arange(100, dtype=torch.uint8)
x[2 ** 31 - 3:2 ** 31 + 3] = torch.tensor([1, 2, 3, 4, 5, 6], dtype=torch.uint8)
s0 = zenith.stats()
y = zenith.compile(lambda a: a * 2 + 1)(x)
native = zenith.stats()["graphs_compiled"] > s0["graphs_compiled"]
idx = torch.cat([torch.arange(0, 100), torch.arange(2 ** 31 - 3, 2 ** 31 + 3), torch.arange(N - 100, N),
                 torch.randint(0, N, (10000,))])
report("uint8 a * 2 + 1 over 2^31 + 77", torch.equal(y[idx], x[idx] * 2 + 1), f"native {native}")
del x, y
gc.collect()

rows, dim = 2 ** 21 + 3, 1024  # 2^31 + 3072 floats
table = torch.empty(rows, dim)
table[:] = 0.5
table[-3:] = torch.randn(3, dim)
table[2 ** 21 - 1] = torch.randn(dim)
ids = torch.tensor([[rows - 1, 0, rows - 3, 2 ** 21 - 1, rows - 2]])
got = zenith.compile(lambda t, i: F.embedding(i, t) * 1.5)(table, ids)
report("embedding from 2^31 + 3072 floats", torch.equal(got, table[ids] * 1.5))
got = zenith.compile(lambda t, i: t.index_select(0, i) + 1)(table, ids[0])
report("index_select from 2^31 + 3072 floats", torch.equal(got, table[ids[0]] + 1))
got = zenith.compile(lambda t: t[-2:, ::3] * 2)(table)
report("slice past 2^31", torch.equal(got, table[-2:, ::3] * 2))
got = zenith.compile(lambda t: t.sum(1))(table)
want = table.sum(1)
report("row sums of 2^31 + 3072 floats", torch.allclose(got, want, rtol=1e-5), f"max diff {(got - want).abs().max().item():.3g}")
del table, got, want
gc.collect()

z = torch.ones(2, 2 ** 30 + 5)
z[1, -5:] = torch.tensor([10.0, 20, 30, 40, 50])
got = zenith.compile(lambda a: (a * 0.5).sum(1))(z)
want = z.sum(1) * 0.5  # (z * 0.5 eagerly would not fit beside the compiled call's)
report("sum over 2 x (2^30 + 5)", torch.allclose(got, want, rtol=1e-5), f"{got.tolist()} vs {want.tolist()}")
got = zenith.compile(lambda a: a.amax(0))(z)
report("amax over dim 0 of 2 x (2^30 + 5)", torch.equal(got[-5:], z[1, -5:]) and torch.equal(got[:5], z[0, :5]))
print("all ok" if ok else "PROBLEMS")
