import torch, zenith, sys
for backend in ("eager", "aot_eager", "inductor", "zenith"):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4)
    f = lambda x: torch.relu(lin(x)).view(-1)
    x = torch.randn(3, 4)
    z = f(x); z.sum().backward(); want = lin.weight.grad.clone(); lin.weight.grad = None
    torch._dynamo.reset()
    z = torch.compile(f, backend=backend)(x)
    z.sub_(10)
    try:
        z.sum().backward()
        print(backend, "grad equal:", torch.allclose(lin.weight.grad, want), float(lin.weight.grad.abs().sum()))
    except RuntimeError as e:
        print(backend, "raises:", str(e)[:80])
