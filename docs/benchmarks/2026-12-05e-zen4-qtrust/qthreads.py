"""Concurrent calls into quantized compiled models: 4 Python threads x N calls each on
one compiled model (int8-static ResNet-18, int8-dynamic BERT (4 layers), int4 and
Q4-style decoder), inputs of two shapes interleaved. Every answer must equal, bit for
bit, the same compiled model's answer on that input called alone."""
import sys
import threading
import time

import torch
import torchvision
import transformers

import zenith

torch.manual_seed(0)
results = []


def hammer(name, c, inputs, calls, threads_n=4, key=lambda o: o):
    g0 = zenith.stats()["graphs_compiled"]
    with torch.no_grad():
        want = [key(c(x)).clone() for x in inputs]
        again = [key(c(x)).clone() for x in inputs]
    same_alone = all(torch.equal(a, b) for a, b in zip(want, again))
    errors = []

    def worker(k):
        try:
            with torch.no_grad():
                for it in range(calls):
                    j = (k + it) % len(inputs)
                    got = key(c(inputs[j]))
                    if not torch.equal(got, want[j]):
                        errors.append((k, it, j, (got - want[j]).abs().max().item()))
        except Exception as e:
            errors.append(repr(e))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads_n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join(900)
    hung = any(t.is_alive() for t in ts)
    graphs = zenith.stats()["graphs_compiled"] - g0
    assert graphs >= 1, f"{name}: nothing compiled by Zenith"
    name += f" ({graphs} graphs)"
    line = (f"{name}: repeat-alone equal {same_alone}; {threads_n} threads x {calls} calls in "
            f"{time.perf_counter() - t0:.1f} s: {len(errors)} differing or failed, hung {hung}")
    print(line, errors[:3], flush=True)
    results.append(not errors and not hung and same_alone)


# int8-static ResNet-18 (the int8 chain: codes between convs)
m = torchvision.models.resnet18().eval()
cal = [torch.randn(2, 3, 64, 64) for _ in range(4)]
zenith.quantize(m, "int8-static", calibration=cal)
c = torch.compile(m, backend="zenith")
hammer("resnet18 int8-static", c, [torch.randn(1, 3, 64, 64), torch.randn(3, 3, 64, 64)], 60)

# int8-dynamic BERT, 4 layers
cfg = transformers.BertConfig(num_hidden_layers=4)
b = transformers.BertModel(cfg).eval()
zenith.quantize(b, "int8-dynamic")
c = torch.compile(b, backend="zenith", dynamic=False)
ids = [torch.randint(0, cfg.vocab_size, (1, 32)), torch.randint(0, cfg.vocab_size, (2, 32))]
hammer("bert-4L int8-dynamic", c, ids, 60, key=lambda o: o.last_hidden_state)

# int4 / nf4 Llama-shaped decoder, one forward over a prompt
for scheme, kw in (("int4", dict(group_size=32)), ("nf4", {}), ("int8", {})):
    lcfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=704, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    lm = transformers.LlamaForCausalLM(lcfg).eval()
    zenith.quantize(lm, scheme, **kw)
    torch._dynamo.reset()  # three models through one HF wrapper frame: past Dynamo's recompile limit
    c = torch.compile(lm, backend="zenith")
    ids = [torch.randint(0, 1000, (1, 1)), torch.randint(0, 1000, (1, 7))]
    hammer(f"llama-2L {scheme}", c, ids, 100, key=lambda o: o.logits)

print("all good" if all(results) else "PROBLEMS", flush=True)
sys.exit(0 if all(results) else 1)
