"""The workloads `zenith bench` can run, by name. Each takes a runner.Config and returns
{"name", "params", "results"} with one entry per requested framework: samples from
interleaved runs, latency summary, cold start, and agreement with eager checked in the
same run. The jobs live apart: runner.py (Config, interleaved timing, checks, probes),
contestants.py (who competes and whether a peer can run), and one module per kind of
workload: inference.py, decode.py, training.py, machine.py (machine and GEMM sweep), isa.py
(each wider kernel path against AVX2's, per node class)."""
from __future__ import annotations

from zenith.bench import decode, inference, isa, machine, training

WORKLOADS = {
    "machine": machine.machine,
    "gemm-sweep": machine.gemm_sweep,
    "isa-check": isa.isa_check,
    "bert-base": inference.bert_base,
    "bert-base-sweep": inference.bert_base,  # the CLI runs it over several sequence lengths
    "bert-base-memory": inference.bert_memory,
    "minilm": inference.minilm,
    "resnet50": inference.resnet50,
    "mobilenet-v2": inference.mobilenet_v2,
    "small-mlp": inference.small_mlp,
    "gpt2-decode": decode.gpt2_decode,
    "tinyllama-decode": decode.tinyllama_decode,
    "tinyllama-memory": decode.tinyllama_memory,
    "gemma3-270m-decode": decode.gemma3_decode,
    "gemma3-270m-perplexity": decode.gemma3_perplexity,
    "train-transformer-43m": training.train_transformer_43m,
    "train-lora": training.train_lora,
}
