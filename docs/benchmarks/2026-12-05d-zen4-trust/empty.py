import torch, zenith
F = torch.nn.functional
torch._dynamo.config.recompile_limit = 1000
torch.manual_seed(0)
conv = torch.nn.Conv2d(3, 8, 3, padding=1).eval()
cases = {
 "conv N=0": (lambda t: conv(t), torch.randn(0, 3, 8, 8)),
 "conv 0x0 map": (lambda t: F.conv2d(t, conv.weight), torch.randn(1, 3, 2, 2)),
 "maxpool N=0": (lambda t: F.max_pool2d(t, 2), torch.randn(0, 3, 8, 8)),
 "avgpool N=0": (lambda t: F.adaptive_avg_pool2d(t, 1), torch.randn(0, 3, 8, 8)),
 "sum empty dim": (lambda t: t.sum(1), torch.randn(3, 0)),
 "mean empty dim": (lambda t: t.mean(1), torch.randn(3, 0)),
 "prod empty dim": (lambda t: t.prod(1), torch.randn(3, 0)),
 "amax empty dim": (lambda t: t.amax(1), torch.randn(3, 0)),
 "softmax empty": (lambda t: t.softmax(1), torch.randn(3, 0)),
 "softmax 0 rows": (lambda t: t.softmax(1), torch.randn(0, 4)),
 "layernorm 0 rows": (lambda t: F.layer_norm(t, (4,)), torch.randn(0, 4)),
 "sdpa 0 keys": (lambda t: F.scaled_dot_product_attention(t, t[:, :, :0], t[:, :, :0]), torch.randn(1, 2, 3, 4)),
 "sdpa 0 queries": (lambda t: F.scaled_dot_product_attention(t[:, :, :0], t, t), torch.randn(1, 2, 3, 4)),
 "matmul K=0": (lambda t: t @ t.new_zeros(0, 5), torch.randn(3, 0)),
 "bmm 0 batch": (lambda t: torch.bmm(t, t.transpose(1, 2)), torch.randn(0, 3, 4)),
 "cat with empty": (lambda t: torch.cat([t, t[:0]]), torch.randn(3, 4)),
 "argmax empty": (lambda t: t.argmax(1), torch.randn(3, 0)),
 "cumsum empty": (lambda t: t.cumsum(0), torch.randn(0, 3)),
 "var one elem": (lambda t: t.var(1), torch.randn(3, 1)),
 "linear 0 in": (lambda t: F.linear(t, torch.randn(5, 0)), torch.randn(3, 0)),
 "embedding empty": (lambda t: F.embedding(torch.zeros(0, dtype=torch.long), t), torch.randn(4, 3)),
 "gelu empty": (lambda t: F.gelu(t), torch.randn(0)),
 "topk k=0": (lambda t: t.topk(0).values, torch.randn(3, 4)),
 "conv 1x1 stride 2 tiny": (lambda t: F.conv2d(t, torch.randn(4, 3, 1, 1), stride=2), torch.randn(1, 3, 1, 1)),
 "interp to 0?": (lambda t: F.interpolate(t, scale_factor=2), torch.randn(0, 3, 4, 4)),
 "bn N=0": (lambda t: F.batch_norm(t, torch.zeros(3), torch.ones(3)), torch.randn(0, 3, 4, 4)),
}
for name, (f, x) in cases.items():
    torch._dynamo.reset()
    try:
        with torch.no_grad(): want = f(x)
        we = None
    except Exception as e: we = f"{type(e).__name__}: {str(e)[:60]}"
    try:
        with torch.no_grad(): got = zenith.compile(f)(x)
        ge = None
    except Exception as e: ge = f"{type(e).__name__}: {str(e)[:100]}"
    if we or ge:
        print(f"{name:22s} eager: {we or 'ok'} | zenith: {ge or 'ok'}")
    else:
        same = want.shape == got.shape and want.dtype == got.dtype and torch.allclose(want.float(), got.float(), equal_nan=True, atol=1e-5)
        print(f"{name:22s} {'same' if same else 'DIFF'}" + ("" if same else f" eager {tuple(want.shape)} {want.view(-1)[:4].tolist()} zenith {tuple(got.shape)} {got.view(-1)[:4].tolist()}"))
