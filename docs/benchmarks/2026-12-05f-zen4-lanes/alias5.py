import torch, zenith
# training: clone / *1 of the saved relu, changed in place
for name, op in (("clone", lambda t: t.clone()), ("mul1", lambda t: t * 1), ("view", lambda t: t.view(-1))):
    res = {}
    for backend in ("inductor", "zenith"):
        torch.manual_seed(0)
        lin = torch.nn.Linear(4, 4)
        f = lambda x: op(torch.relu(lin(x)))
        x = torch.randn(3, 4)
        torch._dynamo.reset()
        z = torch.compile(f, backend=backend)(x)
        z.sub_(10); z.sum().backward()
        res[backend] = lin.weight.grad.clone()
    print("train", name, torch.equal(res["inductor"], res["zenith"]))
# inference: y, y.clone(), y.detach(), y*1
def g(a):
    y = a.exp()
    return y, y.clone(), y.detach(), y * 1
for backend in ("eager", "zenith"):
    torch._dynamo.reset()
    with torch.no_grad():
        outs = torch.compile(g, backend=backend)(torch.randn(3))
    outs[0].add_(100)
    print(backend, [bool((o > 50).all()) for o in outs])
