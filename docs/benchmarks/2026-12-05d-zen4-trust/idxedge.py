import torch, zenith
torch._dynamo.config.recompile_limit = 1000
x = torch.randn(4, 5)
cases = {
 "index_select neg": (lambda t, i: torch.index_select(t, 0, i), torch.tensor([0, -1])),
 "index_select oob": (lambda t, i: torch.index_select(t, 0, i), torch.tensor([0, 4])),
 "adv index neg": (lambda t, i: t[i], torch.tensor([-1, 2])),
 "adv index oob": (lambda t, i: t[i], torch.tensor([5])),
 "adv index -5": (lambda t, i: t[i], torch.tensor([-5])),
 "gather oob": (lambda t, i: torch.gather(t, 1, i), torch.tensor([[0, 5]] * 4)),
 "gather neg": (lambda t, i: torch.gather(t, 1, i), torch.tensor([[0, -1]] * 4)),
 "embedding neg": (lambda t, i: torch.nn.functional.embedding(i, t), torch.tensor([-1])),
 "take_along_dim oob": (lambda t, i: torch.take_along_dim(t, i, 1), torch.tensor([[7]] * 4)),
 "scatter oob": (lambda t, i: torch.zeros(4, 5).scatter(1, i, t[:, :1]), torch.tensor([[9]] * 4)),
 "index_put oob": (lambda t, i: t.index_put((i,), torch.tensor(1.0)), torch.tensor([7])),
 "narrow via slice big": (lambda t, i: t[:, 3:100] * 1, torch.tensor([0])),
 "cast nan->int": (lambda t, i: (t * float("nan")).to(torch.int64), torch.tensor([0])),
 "cast inf->int32": (lambda t, i: (t * float("inf")).to(torch.int32), torch.tensor([0])),
 "cast big->int64": (lambda t, i: (t * 1e30).to(torch.int64), torch.tensor([0])),
 "cast nan->bool": (lambda t, i: (t * float("nan")).to(torch.bool), torch.tensor([0])),
 "cast 300->uint8": (lambda t, i: (t.abs() * 0 + 300.7).to(torch.uint8), torch.tensor([0])),
 "cast -1->uint8": (lambda t, i: (t.abs() * 0 - 1.0).to(torch.uint8), torch.tensor([0])),
}
for name, (f, i) in cases.items():
    torch._dynamo.reset()
    try: want = f(x, i); we = None
    except Exception as e: we = f"{type(e).__name__}: {str(e)[:70]}"
    try: got = zenith.compile(f)(x, i); ge = None
    except Exception as e: ge = f"{type(e).__name__}: {str(e)[:90]}"
    if we or ge:
        print(f"{name:22s} eager: {we or 'ok'} | zenith: {ge or 'ok'}")
    else:
        same = torch.equal(want, got) if want.dtype != torch.float32 else torch.allclose(want, got, equal_nan=True)
        print(f"{name:22s} {'same' if same else 'DIFF'}" + ("" if same else f" eager {want.view(-1)[:4].tolist()} zenith {got.view(-1)[:4].tolist()}"))
