import torch, zenith
cases = {
    "out+select": lambda x: ((x * 2), (x * 2)[:, 1]),
    "input select": lambda x: (x[:, 1],),
    "input select + compute": lambda x: (x[:, 1], x.sum()),
    "input slice": lambda x: (x[1:, 2:],),
    "input diag": lambda x: (x.diagonal(), x + 1),
    "input view": lambda x: (x.view(12), x * 3),
    "input unsqueeze/expand": lambda x: (x.unsqueeze(0).expand(2, 3, 4), x - 1),
    "y and y views": None,
}
def yv(x):
    y = x * 2
    return y, y[:, 1], y.t(), y[1:, :2], y.view(12)
cases["y and y views"] = yv
for name, f in cases.items():
    res = {}
    for backend in ("eager", "zenith"):
        torch._dynamo.reset()
        g = torch.compile(f, backend=backend)
        x = torch.arange(12.).reshape(3, 4)
        outs = g(x)
        vals = [o.clone() for o in outs]
        x.add_(100)
        outs[0].mul_(-1) if outs[0].data_ptr() != x.data_ptr() else None
        res[backend] = [o.clone() for o in outs], vals
    same_values = all(torch.equal(a, b) for a, b in zip(res["eager"][1], res["zenith"][1]))
    same_after = all(torch.equal(a, b) for a, b in zip(res["eager"][0], res["zenith"][0]))
    print(f"{name:28} values {same_values}  after mutation {same_after}")
