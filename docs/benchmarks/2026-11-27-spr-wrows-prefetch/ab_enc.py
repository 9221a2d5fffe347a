"""One contestant per process: python ab_enc.py {bert,minilm} SEQ -> median ms of N calls (after warmup)."""
import statistics, sys, time, torch, zenith, transformers
torch.manual_seed(0); torch.set_num_threads(2)
name, seq = sys.argv[1], int(sys.argv[2])
cfg = transformers.BertConfig() if name == "bert" else transformers.BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
m = transformers.BertModel(cfg).eval()
inp = dict(input_ids=torch.randint(0, 30000, (1, seq)), attention_mask=torch.ones(1, seq, dtype=torch.long))
with torch.no_grad():
    ref = m(**inp).last_hidden_state
    c = torch.compile(m, backend="zenith")
    y = c(**inp).last_hidden_state
    err = (y - ref).abs().max().item()
    for _ in range(5): c(**inp)
    n = 30 if name == "bert" else 100
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); c(**inp); ts.append(time.perf_counter() - t0)
print(f"{zenith.__file__.split('/site-packages')[0][-12:]} {name} s{seq}: {statistics.median(ts)*1e3:.3f} ms maxerr {err:.2e}")
