"""The benchmark's workload plumbing on tiny models: peers that are missing or out of
scope are reported with a reason, training curves are compared with eager, sweeps and
loss curves reach the report."""
import copy
import importlib.util

import pytest
import torch

from zenith.bench import cli, contestants, inference, machine, report, runner, stats, training, workloads
from zenith.bench.runner import Config


def test_missing_peer_is_skipped_with_install_hint(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "onnxruntime" else real(n, *a))
    st = contestants.peer_status("onnxruntime", supported=("onnxruntime",))
    assert st["status"] == "skipped" and "not installed" in st["reason"] and "pip install" in st["reason"]


def test_peer_outside_its_scope_is_skipped_with_reason(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "llama_cpp" else real(n, *a))
    st = contestants.peer_status("llamacpp", supported=("onnxruntime",))
    assert st["status"] == "skipped" and "gemma3" in st["reason"]
    assert contestants.peer_status("eager") is None


def test_failing_contestant_is_reported_and_run_goes_on():
    def boom():
        raise RuntimeError("kaput")

    res = runner.run_interleaved(Config(iterations=3, warmup=1), {"eager": lambda: torch.ones(3), "bad": boom},
                                    lambda fw, out: runner.agreement(torch.ones(3), out))
    assert res["bad"]["status"] == "failed" and "kaput" in res["bad"]["reason"]
    assert res["eager"]["status"] == "ok" and len(res["eager"]["samples_s"]) == 3


def test_training_loss_curves_match_eager_on_a_tiny_gpt():
    import transformers

    def tiny():
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))

    cfg = Config(frameworks=("eager", "zenith"), steps=6, threads=1)
    w = training.train(cfg, "train-tiny", {"batch": 2, "seq": 16}, tiny, lambda m: m.parameters(),
                         training.lm_batches(64, 2, 16, 6))
    eager, zen = w["results"]["eager"], w["results"]["zenith"]
    assert eager["status"] == "ok" and zen["status"] == "ok", w["results"]
    assert len(eager["loss_curve"]) == len(zen["loss_curve"]) == 6  # cold + warm-up + 4 timed steps
    assert zen["agreement"]["loss_max_abs_diff"] < 1e-4
    assert eager["loss_curve"][-1] < eager["loss_curve"][0]  # it learns
    assert zen["nodes_native"] > 0


def _ok(seq, ms):
    xs = [ms * 1e-3 * f for f in (0.98, 1.0, 1.02)]
    return {"status": "ok", "samples_s": xs, "latency": stats.summary(xs), "cold_start_s": 1.0, "agreement": {}}


def test_report_draws_sweeps_and_loss_curves(tmp_path):
    pytest.importorskip("matplotlib")
    doc = {"schema": "zenith-bench/1", "created": "2026-11-22T00:00:00", "config": {},
           "machine": {"cpu": "x", "cores": 2, "threads": 2, "torch": "t", "zenith": "z", "zenith_commit": "c"},
           "workloads": [{"name": "bert-base", "workload": "bert-base", "params": {"batch": 1, "seq": s},
                          "results": {"eager": _ok(s, s / 10), "zenith": _ok(s, s / 12)}} for s in (8, 32, 128)]}
    doc["workloads"] += [{"name": "resnet50", "workload": "resnet50", "params": {"batch": b},
                          "results": {"eager": _ok(b, b * 10.0)}} for b in (1, 8)]
    curve = dict(_ok(16, 5), loss_curve=[4.0, 3.5, 3.1])
    doc["workloads"].append({"name": "train-x", "params": {"batch": 2, "seq": 16},
                             "results": {"eager": curve, "zenith": copy.deepcopy(curve)}})
    plots, note = report._plots(doc, str(tmp_path))
    assert note is None
    assert "bert-base-seq-sweep-b1.png" in plots and "train-x-b2-s16-loss.png" in plots
    assert "resnet50-batch-sweep.png" in plots  # a batch sweep of a workload without a sequence length
    assert all((tmp_path / p).stat().st_size > 1000 for p in plots)
    md = report.render_markdown(doc, plots)
    assert "## bert-base (batch 1, seq 32)" in md and "final loss 3.1000 after 3 steps" in md
    assert "![bert-base-seq-sweep-b1](bert-base-seq-sweep-b1.png)" in md


def test_bf16_run_is_labelled_and_compared_with_fp32():
    cfg = Config(frameworks=("eager", "zenith", "onnxruntime"), iterations=2, warmup=1, threads=1, dtype="bf16")
    make = lambda: torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))  # noqa: E731
    w = inference.model_workload(cfg, "mlp", {"batch": 3}, make, lambda: (torch.randn(3, 16),), 3)
    assert w["params"]["dtype"] == "bf16"
    assert w["results"]["onnxruntime"]["status"] == "skipped"
    zen = w["results"]["zenith"]
    assert zen["status"] == "ok", zen
    assert zen["agreement"]["cosine"] > 0.999  # against eager in bf16
    assert 0.99 < zen["agreement"]["cosine_vs_fp32"] <= 1.0 + 1e-9  # what bf16 costs against fp32


def test_gemm_sweep_checks_every_contestant_and_reports_both_ratios(tmp_path):
    # Odd shapes; both Zenith contestants' products are checked against torch.mm and
    # the rows carry their throughput ratios; a square shape the machine's OpenBLAS
    # probe measured is reported as a fraction of it.
    shapes = [(1, 37, 19), (7, 5, 130), (64, 64, 64)]
    w = machine.gemm_sweep(Config(threads=1, iterations=3, extra={"gemm_shapes": shapes,
                                                                  "ukernel_shapes": [(13, 37, 19)]}))
    assert [(r["m"], r["n"], r["k"]) for r in w["rows"]] == shapes
    for r in w["rows"]:
        res = r["results"]
        for fw in ("torch.mm", "zenith", "zenith unpacked"):
            assert res[fw]["status"] == "ok", res[fw]
            assert res[fw]["agreement"]["max_rel_err"] < 1e-5
        for fw in ("zenith", "zenith unpacked"):
            assert res[fw]["throughput_ratio_vs_torch"]["median"] > 0
    blas = machine.openblas_sgemm(1, sizes=(64,))
    assert blas.get("gflops", {}).get(64, 1) > 0 and ("gflops" in blas or blas["reason"])
    machine_row = {"name": "machine", "params": {}, "results": {}, "peak_sgemm_gflops": 1.0,
                   "memory_bandwidth_gbs": 1.0, "read_bandwidth_gbs": 1.5, "openblas": {"library": "test", "gflops": {64: 2.0}}}
    doc = {"schema": "zenith-bench/1", "created": "2026-11-22T00:00:00", "config": {},
           "machine": {"cpu": "x", "cores": 2, "threads": 1, "torch": "t", "zenith": "z", "zenith_commit": "c"},
           "workloads": [machine_row, w]}
    zg = w["rows"][2]["results"]["zenith"]["gflops"]
    assert report.openblas_fractions(doc) == [(64, zg, 2.0)]
    assert "7x5    x130" in cli.render_table(doc) and "of OpenBLAS 2.0" in cli.render_table(doc)
    md = report.render_markdown(doc)
    assert "| 7x5x130 |" in md and "OpenBLAS SGEMM (test" in md and "of OpenBLAS's 2.0" in md
    assert "1.5 GB/s (read)" in cli.render_table(doc) and "memory read bandwidth (sum over 256 MiB): 1.5 GB/s" in md
    # Every micro-kernel of the list has a row: timed and checked where the CPU runs it,
    # skipped with the ISA it needs where not.
    from zenith import _C

    listed = _C.gemm_ukernels()
    (row,) = w["ukernels"]["rows"]
    assert [k["name"] for k in w["ukernels"]["kernels"]] == [u["name"] for u in listed] == list(row["results"])
    for u in listed:
        r = row["results"][u["name"]]
        if u["supported"]:
            assert r["status"] == "ok" and r["agreement"]["max_rel_err"] < 1e-5 and r["gflops"] > 0, (u, r)
        else:
            assert r["status"] == "skipped" and u["isa"] in r["reason"]
        assert u["name"] in cli.render_table(doc) and f"| {u['name']} | {u['mr']}x{u['nr']} |" in md
    assert any(u["supported"] for u in listed)
    if importlib.util.find_spec("matplotlib"):
        assert "gemm-sweep.png" in report._plots(doc, str(tmp_path))[0]


def test_memory_workload_reaches_table_and_report():
    # The rows bert_memory returns (its probe builds BERT-base in a subprocess, too
    # heavy for the suite; `zenith bench bert-base-memory` runs it), rendered.
    from zenith.bench import cli

    w = {"name": "bert-base-memory", "params": {"batch": 1, "seq": 128, "dtype": "fp32"}, "results": {},
         "memory": {"eager": {"peak_rss_mib": 1000.0, "after_load_mib": 900.0, "max_abs_err": 0.0, "vs_eager": 1.0},
                    "zenith": {"peak_rss_mib": 1050.0, "after_load_mib": 900.0, "max_abs_err": 3e-6,
                               "vs_eager": 1.05, "first_call_s": 2.345},
                    "inductor": {"reason": "RuntimeError: boom"}}}
    doc = {"schema": "zenith-bench/1", "created": "2026-11-22T00:00:00", "config": {},
           "machine": {"cpu": "x", "cores": 2, "threads": 1, "torch": "t", "zenith": "z", "zenith_commit": "c"},
           "workloads": [w]}
    table = cli.render_table(doc)
    assert "peak RSS 1050 MiB, 1.050x eager's" in table and "failed: RuntimeError: boom" in table
    assert "- zenith: peak RSS 1050 MiB, 1.050x eager's" in report.render_markdown(doc)
    assert "first call 2.35 s" in table and "first call" not in table.split("eager ")[1].split("\n")[0]


def test_fresh_process_probes_get_an_empty_inductor_cache_each(monkeypatch, tmp_path):
    # The in-process workloads fill the run's Inductor cache; a probe that inherited it
    # would time a warm-cache "first call". Each probe gets a new, empty directory,
    # unless the run keeps the user's warm cache; the directory is gone once its probe ends.
    import os

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    seen, empty = [], []

    def probe(code, args, **env):
        seen.append(env)
        d = env.get("TORCHINDUCTOR_CACHE_DIR")
        empty.append(d is not None and os.path.isdir(d) and not os.listdir(d))
        return {"peak_rss_mib": 1.0}

    monkeypatch.setattr(inference, "run_probe", probe)
    inference.bert_memory(Config(frameworks=("eager", "inductor", "zenith")))
    dirs = [e["TORCHINDUCTOR_CACHE_DIR"] for e in seen]
    assert len(seen) == 3 and len(set(dirs)) == 3 and str(tmp_path) not in dirs
    assert all(empty) and not any(os.path.exists(d) for d in dirs)
    seen.clear()
    inference.bert_memory(Config(frameworks=("inductor",), empty_inductor_cache=False))
    assert "TORCHINDUCTOR_CACHE_DIR" not in seen[0]


def test_small_mlp_workload_runs_every_contestant_and_checks_them():
    w = workloads.WORKLOADS["small-mlp"](Config(frameworks=("eager", "zenith"), iterations=3, warmup=1, threads=1))
    assert w["name"] == "small-mlp" and w["params"]["features"] == 256
    for fw in ("eager", "zenith"):
        r = w["results"][fw]
        assert r["status"] == "ok" and len(r["samples_s"]) == 3, r
        assert r["agreement"]["max_abs_err"] < 1e-5


def test_cli_runs_workloads_by_name_from_the_registry(tmp_path):
    # `zenith bench NAME` finds every workload it names (standard suite and sweeps) in
    # the registry, runs one end to end into a valid JSON, and refuses unknown names.
    import json

    from zenith.bench import cli, schema

    assert set(cli.STANDARD) | set(cli.SEQ_SWEEPS) | set(cli.BATCH_SWEEPS) <= set(workloads.WORKLOADS)
    assert all(callable(f) for f in workloads.WORKLOADS.values())
    out = tmp_path / "r.json"
    assert cli.main(["bench", "small-mlp", "--frameworks", "eager,zenith", "--iterations", "2", "--warmup", "1",
                     "--threads", "1", "--warm-inductor-cache", "--json", str(out)]) == 0
    doc = schema.validate(json.loads(out.read_text()))
    (w,) = doc["workloads"]
    assert w["name"] == "small-mlp" and {fw: r["status"] for fw, r in w["results"].items()} == {
        "eager": "ok", "zenith": "ok"}
    # the command as given, whatever the process's argv (pytest's here; `python -m zenith.bench` lacks "bench")
    assert doc["config"]["command"] == ("zenith bench small-mlp --frameworks eager,zenith --iterations 2 --warmup 1 "
                                        f"--threads 1 --warm-inductor-cache --json {out}")
    with pytest.raises(SystemExit, match="unknown workload.s.: nope; known: machine, gemm-sweep"):
        cli.main(["bench", "nope"])
    with pytest.raises(SystemExit, match="unknown framework.s.: tvm; known: eager"):
        cli.main(["bench", "small-mlp", "--frameworks", "eager,tvm"])


def test_run_held_to_an_isa_by_the_environment_says_so(monkeypatch):
    # A run with ZENITH_NO_AVX512 / ONEDNN_MAX_CPU_ISA set measures other kernels than one
    # without: the machine record keeps those variables, the report prints them, and a
    # run without them records none (and prints no such line).
    from zenith.bench import cli, report

    for k in cli.ISA_ENV:
        monkeypatch.delenv(k, raising=False)
    assert cli.machine_info(1)["isa_env"] == {}
    monkeypatch.setenv("ZENITH_NO_AVX512", "1")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    m = cli.machine_info(1)
    assert m["isa_env"] == {"ZENITH_NO_AVX512": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    doc = {"created": "2026-11-26T00:00:00", "config": {}, "machine": m, "workloads": []}
    assert "ISA held by the environment: ZENITH_NO_AVX512=1, ONEDNN_MAX_CPU_ISA=AVX2." in report.render_markdown(doc)
    doc["machine"] = dict(m, isa_env={})
    assert "ISA held" not in report.render_markdown(doc)


def test_window_nll_is_cross_entropy_of_the_next_token():
    from zenith.bench import decode

    torch.manual_seed(0)
    logits, w = torch.randn(7, 11), torch.randint(0, 11, (7,))
    nll, n = decode.window_nll(logits, w)
    want = torch.nn.functional.cross_entropy(logits[:-1].double(), w[1:], reduction="sum").item()
    assert n == 6 and nll == pytest.approx(want, rel=1e-12)


def test_quant_contestants_are_named_per_scheme():
    from zenith.bench import decode

    cfg = Config(frameworks=("eager", "zenith", "llamacpp"), quant=("fp32", "gguf", "int8"))
    names, variants = decode.gemma3_contestants(cfg, torch.nn.Linear(2, 2), "model.gguf")
    assert names == ["eager", "zenith", "zenith:gguf", "zenith:int8", "llamacpp:q4_k_m"]
    assert set(variants) == {"zenith:gguf", "zenith:int8"}


def test_encoder_quant_contestants_include_onnxruntime_dynamic_int8():
    cfg = Config(frameworks=("eager", "zenith", "onnxruntime"), quant=("fp32", "int8", "int4"))
    assert inference.contestants(cfg, quantizable=True) == [
        "eager", "zenith", "zenith:int8", "zenith:int4", "onnxruntime", "onnxruntime:int8-dynamic"]
    # fp32 alone, or a workload zenith.quantize does not cover (CNNs): the plain contestants
    assert inference.contestants(Config(frameworks=cfg.frameworks), quantizable=True) == list(cfg.frameworks)
    assert inference.contestants(cfg, quantizable=False) == list(cfg.frameworks)


def test_openvino_int8_runs_beside_any_int8_scheme_given_calibration():
    # OpenVINO's INT8 for these models is NNCF's post-training quantization: a user of
    # OpenVINO compares Zenith's dynamic int8 against it too.
    cal = [(torch.ones(1, 4),)]
    for quant in (("fp32", "int8-dynamic"), ("int8",), ("int8-static",), ("int8-dynamic-w7",)):
        cfg = Config(frameworks=("zenith", "openvino"), quant=quant)
        assert inference.contestants(cfg, quantizable=True, calibration=cal)[-2:] == [
            "openvino", "openvino:int8-static"], quant
    cfg = Config(frameworks=("zenith", "openvino"), quant=("int8-dynamic",))
    assert inference.contestants(cfg, quantizable=True)[-1] == "openvino"  # no calibration batches
    cfg = Config(frameworks=("zenith", "openvino"), quant=("int4", "nf4"))
    assert inference.contestants(cfg, quantizable=True, calibration=cal)[-1] == "openvino"


def test_openvino_int8_without_nncf_is_skipped_with_the_reason(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "nncf" else (object() if n == "openvino" else real(n, *a)))
    cfg = Config(frameworks=("openvino",), quant=("int8-dynamic",))
    assert inference.unavailable(cfg, "openvino") is None
    st = inference.unavailable(cfg, "openvino:int8-static")
    assert st["status"] == "skipped" and "nncf" in st["reason"], st


def test_calibration_is_recorded_for_a_peer_calibrated_alone(monkeypatch):
    # --frameworks openvino --quant int8-static: NNCF calibrates on batches the JSON names
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in ("openvino", "nncf") else real(n, *a))
    cfg = Config(frameworks=("eager", "openvino"), quant=("int8-static",), iterations=1, warmup=0, threads=1,
                 settle=False)
    w = inference.model_workload(cfg, "tiny", {}, lambda: torch.nn.Sequential(torch.nn.Linear(8, 4)),
                                 lambda: (torch.randn(2, 8),), 2, quantizable=True,
                                 calibration=[(torch.randn(2, 8),) for _ in range(3)])
    assert w["params"]["calibration"] == {"batches": 3, "contestants": ["openvino:int8-static"]}
    assert w["results"]["openvino:int8-static"]["status"] == "skipped"


def test_openvino_int8_needs_calibration_and_a_known_variant():
    from zenith.bench import peers

    with pytest.raises(ValueError, match="calibration"):
        peers.openvino_fn(torch.nn.Identity(), (torch.ones(2),), 1, quantize="int8-static")
    with pytest.raises(ValueError, match="no quantized variant"):
        peers.openvino_fn(torch.nn.Identity(), (torch.ones(2),), 1, quantize="int4")


@pytest.mark.skipif(importlib.util.find_spec("nncf") is None or importlib.util.find_spec("openvino") is None,
                    reason="openvino / nncf not installed (make .venv/.bench-deps)")
def test_openvino_int8_peer_quantizes_and_stays_close_to_eager():
    from zenith.bench import peers

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()
    x = torch.randn(4, 64)
    cal = [(torch.randn(4, 64),) for _ in range(8)]
    fn = peers.openvino_fn(model, (x,), threads=1, quantize="int8-static", calibration=cal)
    with torch.no_grad():
        ref = model(x)
    got = fn()
    assert got.shape == ref.shape and torch.isfinite(got).all()
    err = (got - ref).abs().max().item()
    # int8: close to eager, but not equal to it (an fp32 run would be equal to ~1e-6)
    assert 1e-5 < err < 0.05 * ref.abs().max().item(), err


def test_scheme_with_options_is_its_own_contestant():
    # int8-dynamic-w7: int8-dynamic with linear_weight_bits=7, beside ONNX Runtime's dynamic int8
    from zenith.quant import QLinear

    cfg = Config(frameworks=("zenith", "onnxruntime"), quant=("fp32", "int8-dynamic-w7"))
    assert inference.contestants(cfg, quantizable=True) == [
        "zenith", "zenith:int8-dynamic-w7", "onnxruntime", "onnxruntime:int8-dynamic"]
    torch.manual_seed(0)
    names, variants = contestants.quant_variants(cfg, torch.nn.Sequential(torch.nn.Linear(64, 32)))
    assert names == ["zenith", "zenith:int8-dynamic-w7"]
    q = variants["zenith:int8-dynamic-w7"]()
    assert int(q[0].weight[:, 4:].view(torch.int8).abs().max()) == 63 and isinstance(q[0], QLinear)
    # int4-g64 / int4-g128: int4 with that group size (no ONNX Runtime counterpart)
    cfg = Config(frameworks=("zenith", "onnxruntime"), quant=("int4", "int4-g64", "int4-g128"))
    assert inference.contestants(cfg, quantizable=True) == [
        "zenith:int4", "zenith:int4-g64", "zenith:int4-g128", "onnxruntime"]
    names, variants = contestants.quant_variants(cfg, torch.nn.Sequential(torch.nn.Linear(256, 32)))
    assert [variants[n]()[0].format for n in names] == ["q4_0", "int4_g64", "int4_g128"]
    assert set(contestants.SCHEME_OPTIONS) <= set(cli.QUANT_SCHEMES)  # each one a --quant name the CLI takes


def test_static_contestant_takes_the_workloads_calibration_options():
    from zenith.quant import summary

    assert contestants.static_label(None) == "percentile 99.99"
    assert contestants.static_label(inference.ENCODER_STATIC) == "minmax, smooth 0.85"
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    calibration = [(torch.randn(3, 16),) for _ in range(2)]
    cfg = Config(frameworks=("zenith",), quant=("fp32", "int8-static"))
    names, variants = contestants.quant_variants(cfg, base, calibration=calibration,
                                                 static_options=inference.ENCODER_STATIC)
    assert names == ["zenith", "zenith:int8-static"]
    layers = summary(variants["zenith:int8-static"]()).layers
    assert [layer.smoothed for layer in layers] == [True, True] and all(layer.x_scale for layer in layers)
    plain = summary(contestants.quant_variants(cfg, base, calibration=calibration)[1]["zenith:int8-static"]())
    assert not any(layer.smoothed for layer in plain.layers)


def test_quantized_encoder_contestant_runs_and_is_checked_against_eager_fp32():
    # A tiny model through model_workload: zenith:int8 is the int8 copy compiled by
    # Zenith; its error against eager fp32 is what int8 costs (nonzero, small).
    cfg = Config(frameworks=("eager", "zenith"), quant=("fp32", "int8"), iterations=2, warmup=1, threads=1)
    torch.manual_seed(0)
    w = inference.model_workload(
        cfg, "tiny", {}, lambda: torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)),
        lambda: (torch.randn(4, 64),), 4, quantizable=True)
    assert w["params"]["quant"] == ["fp32", "int8"]
    assert set(w["results"]) == {"eager", "zenith", "zenith:int8"}
    q = w["results"]["zenith:int8"]
    assert q["status"] == "ok", q
    assert 0 < q["agreement"]["max_abs_err"] and q["agreement"]["cosine"] > 0.99
    assert w["results"]["zenith"]["agreement"]["max_abs_err"] < 1e-5
    # Each Zenith contestant's GEMMs from its profile: one row per layer shape, the fp32
    # ones set against the run's peak SGEMM, the int8 ones (qmatmul) not.
    fp32 = {(g["op"], g["m"], g["n"], g["k"]): g for g in w["results"]["zenith"]["gemms"]["rows"]}
    assert set(fp32) == {("addmm", 4, 64, 64), ("addmm", 4, 8, 64)}, fp32
    assert all(g["per_call"] == 1 and g["median_us"] > 0 and g["gflops"] > 0 for g in fp32.values())
    assert {(g["op"], g["m"], g["n"], g["k"]) for g in q["gemms"]["rows"]} == {("qmatmul", 4, 64, 64),
                                                                             ("qmatmul", 4, 8, 64)}
    assert "gemms" not in w["results"]["eager"]
    # The share's base: the largest of the run's peak and the 2048^3 rates measured beside
    # each profile (here the profiles' alone; the test then sets them to 1.0, below the
    # machine row's 2.0, and the machine row's peak is the base).
    after = [w["results"][fw]["gemms"]["zenith_sgemm_2048_gflops"] for fw in ("zenith", "zenith:int8")]
    assert all(a > 0 for a in after) and report.gemm_peak(w, None) == max(after)
    for fw in ("zenith", "zenith:int8"):
        w["results"][fw]["gemms"]["zenith_sgemm_2048_gflops"] = 1.0
    from zenith.bench import cli

    doc = {"schema": "zenith-bench/1", "created": "2026-12-02T00:00:00", "config": {},
           "machine": {"cpu": "x", "cores": 2, "threads": 1, "torch": "t", "zenith": "z", "zenith_commit": "c"},
           "workloads": [w]}
    md = report.render_markdown(doc)
    g = fp32[("addmm", 4, 64, 64)]
    assert f"| zenith | addmm | 4x64x64 | 1 | {g['median_us']:.1f} | {g['gflops']:.1f} | {g['gflops']:.0%} |" in md
    assert "the share is of 1.0 GFLOP/s, Zenith's 2048^3 measured right after each profile (up to 1.0)" in md
    peak = {"name": "machine", "params": {}, "results": {}, "sgemm_gflops": {"torch.mm": 0.5, "zenith": 2.0},
            "peak_sgemm_gflops": 2.0, "peak_sgemm_source": "zenith", "memory_bandwidth_gbs": 1.0}
    doc["workloads"].insert(0, peak)
    md, table = report.render_markdown(doc), cli.render_table(doc)
    assert f"| {g['gflops']:.1f} | {g['gflops'] / 2.0:.0%} |" in md
    assert "the largest of the run's peak (2.0: zenith) and Zenith's 2048^3 measured right after" in md
    # A run whose profiles measured nothing beside them and has no machine row: no share.
    for fw in ("zenith", "zenith:int8"):
        del w["results"][fw]["gemms"]["zenith_sgemm_2048_gflops"]
    doc["workloads"].pop(0)
    md = report.render_markdown(doc)
    assert "no peak was measured in this run" in md and f"| {g['gflops']:.1f} | - |" in md
    # bf16 / fp16 runs' matmuls are not fp32 GEMMs: no share of an fp32 peak
    w["results"]["zenith"]["gemms"]["zenith_sgemm_2048_gflops"] = 1.0
    assert report.gemm_rows(w, None)[0][6] is not None
    w["params"]["dtype"] = "bf16"
    assert all(row[6] is None for row in report.gemm_rows(w, (2.0, "zenith")))
    assert "no share of peak: not fp32" in report.render_markdown(doc)
    line = f"zenith addmm 4x64x64 x1: {g['median_us']:.1f} us, {g['gflops']:.1f} GFLOP/s ({g['gflops'] / 2.0:.0%} "
    assert line in table and "zenith:int8 qmatmul 4x64x64 x1" in table
    assert "2.0 GFLOP/s (zenith; 2048^3: torch.mm 0.5, zenith 2.0)" in table


def test_isa_rates_cover_every_isa_and_reach_the_report():
    from zenith import _C
    from zenith.bench import cli

    rates = _C.isa_mac_rates(iters=20000, runs=1)
    assert [r["name"] for r in rates] == ["fp32 fma (avx2)", "int8 maddubs+madd (avx2)", "int8 dpbusd (avx-vnni)",
                                          "fp32 fma (avx512)", "int8 dpbusd (avx512-vnni)"]
    assert rates[0]["supported"] and rates[1]["supported"]  # AVX2 + FMA: every machine Zenith runs on
    assert all((r["gmacs"] > 0) == r["supported"] for r in rates), rates
    for bad in ({"iters": 0}, {"iters": -5}, {"runs": 0}):
        with pytest.raises(RuntimeError, match="at least 1"):
            _C.isa_mac_rates(**bad)
    w = {"name": "machine", "peak_sgemm_gflops": 1.0, "memory_bandwidth_gbs": 1.0, "isa_mac_rates": [
        {"name": "fp32 fma (avx2)", "supported": True, "gmacs": 60.0},
        {"name": "int8 maddubs+madd (avx2)", "supported": True, "gmacs": 123.0},
        {"name": "int8 dpbusd (avx-vnni)", "supported": False, "gmacs": 0.0},
        {"name": "fp32 fma (avx512)", "supported": True, "gmacs": 120.0},
        {"name": "int8 dpbusd (avx512-vnni)", "supported": True, "gmacs": 480.0}]}
    text = report.isa_rates_text(w)
    assert "int8 maddubs+madd (avx2) 123 (2.05x fp32's)" in text and "int8 dpbusd (avx512-vnni) 480 (4.00x" in text
    assert "avx-vnni" not in text and report.isa_rates_text({"name": "machine"}) == ""
    doc = {"schema": "zenith-bench/1", "created": "2026-12-02T00:00:00", "config": {},
           "machine": {"cpu": "x", "cores": 2, "threads": 1, "torch": "t", "zenith": "z", "zenith_commit": "c"},
           "workloads": [w]}
    assert text in cli.render_table(doc) and f"- {text}" in report.render_markdown(doc)


def test_machine_peak_is_the_fastest_sgemm_measured():
    assert machine.peak_sgemm({"torch.mm": 190.0, "openblas": 217.0, "zenith": 410.0}) == (410.0, "zenith")
    assert machine.peak_sgemm({"torch.mm": 190.0, "openblas": 217.0}) == (217.0, "openblas")
    # A run from before the peak took the fastest: torch.mm's alone.
    old = {"workloads": [{"name": "machine", "peak_sgemm_gflops": 150.0}]}
    assert report.machine_peak(old) == (150.0, "torch.mm") and report.machine_peak({"workloads": []}) is None


def test_machine_peak_is_at_least_the_fma_ceiling():
    rates = [{"name": "fp32 fma (avx2)", "supported": True, "gmacs": 60.0},
             {"name": "fp32 fma (avx512)", "supported": True, "gmacs": 121.0},
             {"name": "int8 dpbusd (avx512-vnni)", "supported": True, "gmacs": 480.0}]
    w = {"name": "machine", "peak_sgemm_gflops": 257.0, "peak_sgemm_source": "zenith", "isa_mac_rates": rates}
    doc = {"machine": {"threads": 2}, "workloads": [w]}
    peak, source = report.machine_peak(doc)
    assert peak == 484.0 and "121 GMAC/s" in source and "2 threads" in source  # the int8 rate is not fp32's
    rates[1]["supported"] = False  # no AVX-512: AVX2's 2 x 60 x 2 = 240 is below the SGEMM's 257
    assert report.machine_peak(doc) == (257.0, "zenith")
    # a model's GEMM is then shared against the ceiling, not the slower SGEMM
    rates[1]["supported"] = True
    gw = {"params": {"dtype": "fp32"}, "results": {"zenith": {"status": "ok", "gemms": [
        {"op": "addmm", "m": 128, "n": 768, "k": 768, "per_call": 48, "median_us": 350.0, "gflops": 430.0}]}}}
    assert report.gemm_rows(gw, report.machine_peak(doc))[0][-1] == pytest.approx(430.0 / 484.0)


def test_unknown_quant_scheme_is_refused():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "zenith.cli", "bench", "small-mlp", "--quant", "fp32,int3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "int3" in r.stderr and "known" in r.stderr


def _tiny_llama_config():
    import transformers

    return transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                    num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)


def test_weight_bytes_per_token_counts_linears_whole_and_one_embedding_row():
    import transformers

    import zenith
    from zenith.bench import decode

    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(_tiny_llama_config()).eval()
    linear = sum(x.weight.numel() for x in m.modules() if isinstance(x, torch.nn.Linear))
    others = sum(t.numel() for x in m.modules() if not isinstance(x, (torch.nn.Linear, torch.nn.Embedding))
                 for t in list(x.parameters(recurse=False)) + list(x.buffers(recurse=False)) if t.is_floating_point())
    assert decode.weight_bytes_per_token(m)["weight_bytes_per_token"] == 4 * (linear + 64 + others)
    q = zenith.quantize(copy.deepcopy(m), "int8", include_embeddings=True)
    qbytes = sum(x.weight.numel() for x in q.modules() if isinstance(x, zenith.quant.QLinear))
    emb = q.model.embed_tokens.weight  # a QEmbedding: one row of its stored bytes a token
    assert decode.weight_bytes_per_token(q)["weight_bytes_per_token"] == qbytes + emb.shape[1] + 4 * others
    # an LM head tied to the embedding reads the whole matrix
    m.lm_head.weight = m.model.embed_tokens.weight
    assert decode.weight_bytes_per_token(m)["weight_bytes_per_token"] == 4 * (linear + others)


def test_tinyllama_decode_runs_each_quant_scheme_and_reports_bandwidth(monkeypatch):
    # The workload on a tiny Llama config: one Zenith contestant per --quant scheme (no
    # GGUF file for a random-init config, so no zenith:gguf), each checked against
    # eager's tokens and given its weight bytes and bandwidth share.
    from zenith.bench import decode

    monkeypatch.setattr(decode, "tinyllama_config", _tiny_llama_config)
    cfg = Config(frameworks=("eager", "zenith"), quant=("fp32", "int8", "gguf"), iterations=2, warmup=1,
                 threads=1, new_tokens=4)
    w = decode.tinyllama_decode(cfg)
    assert list(w["results"]) == ["eager", "zenith", "zenith:int8"] and w["read_bandwidth_gbs"] > 0
    r = w["results"]
    assert all(x["status"] == "ok" for x in r.values()), r
    assert r["zenith"]["agreement"]["tokens_equal"]
    assert r["zenith:int8"]["weight_bytes_per_token"] < r["zenith"]["weight_bytes_per_token"] / 3
    assert all(0 < x["bandwidth_share"] for fw, x in r.items() if fw != "eager")
    # time to first token: a median of interleaved one-token runs; the tokens after the
    # first from the two medians (absent only if the difference is not positive)
    assert all(0 < x["time_to_first_token_s"] < x["latency"]["median"] * 2 for x in r.values())
    assert all(x.get("after_first_tokens_s", 1) > 0 for x in r.values())
    md = report.render_markdown({
        "created": "2026-11-24", "config": {}, "workloads": [w],
        "machine": {"cpu": "x", "cores": 2, "threads": 1, "torch": "t", "zenith": "z", "zenith_commit": "c"}})
    assert "of the bandwidth" in md and "TTFT" in md and "Memory read bandwidth measured in this workload" in md


def test_tinyllama_memory_probes_each_scheme_in_its_own_process(monkeypatch):
    from zenith.bench import cli, decode

    monkeypatch.setattr(decode, "tinyllama_config", _tiny_llama_config)
    w = decode.tinyllama_memory(Config(frameworks=("eager", "zenith"), quant=("fp32", "int4"), threads=1,
                                       new_tokens=4))
    rows = w["memory"]
    assert list(rows) == ["eager", "zenith", "zenith:int4"]
    assert all("peak_rss_mib" in r and len(r["tokens"]) == 4 for r in rows.values()), rows
    assert rows["zenith"]["token_agreement"] == 1.0 and rows["zenith"]["vs_zenith_fp32"] == 1.0
    assert rows["zenith"]["above_imports_vs_zenith_fp32"] == 1.0
    assert 0 < rows["zenith:int4"]["above_imports_vs_zenith_fp32"] < rows["zenith:int4"]["vs_zenith_fp32"] * 2
    doc = {"created": "2026-11-24", "config": {}, "workloads": [w],
           "machine": {"cpu": "x", "cores": 2, "threads": 1, "torch": "t", "zenith": "z", "zenith_commit": "c"}}
    assert "Zenith fp32's" in cli.render_table(doc) and "above the imports" in cli.render_table(doc)
    assert "## tinyllama-memory" in report.render_markdown(doc)


def test_onnxruntime_peer_removes_its_export_once_the_session_has_it(tmp_path, monkeypatch):
    # The same without onnxruntime installed (a fresh `make setup` has none): a stand-in
    # session that reads the exported file when it is made, as ONNX Runtime does.
    import sys
    import tempfile
    import types

    from zenith.bench import peers

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(torch.onnx, "export", lambda model, args, path, **kw: open(path, "wb").write(b"onnx"))
    read = []

    class Session:
        def __init__(self, path, options, providers):
            read.append(open(path, "rb").read())

        def get_inputs(self):
            return [types.SimpleNamespace(name="input_0")]

        def run(self, names, feed):
            return [feed["input_0"] * 2]

    class Options:
        def add_session_config_entry(self, key, value):
            pass

    fake = types.SimpleNamespace(SessionOptions=Options, InferenceSession=Session,
                                 GraphOptimizationLevel=types.SimpleNamespace(ORT_ENABLE_ALL=99))
    monkeypatch.setitem(sys.modules, "onnxruntime", fake)
    fn = peers.onnxruntime_fn(torch.nn.Identity(), (torch.ones(2),), threads=1)
    assert torch.equal(fn(), torch.full((2,), 2.0)) and torch.equal(fn(), torch.full((2,), 2.0))
    assert read == [b"onnx"] and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime not installed")
def test_onnxruntime_peer_leaves_no_files_behind(tmp_path, monkeypatch):
    # Each bench run exported into a temp directory it never removed (0.4-0.9 GB per
    # encoder); 91 runs filled the disk. The session keeps the model once it is built.
    import tempfile

    from zenith.bench import peers

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    x = torch.randn(3, 8)
    fn = peers.onnxruntime_fn(model, (x,), threads=1)
    first, second = fn(), fn()
    with torch.no_grad():
        ref = model(x)
    torch.testing.assert_close(first, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(second, ref, rtol=1e-5, atol=1e-6)
    assert list(tmp_path.iterdir()) == []


def test_isa_check_flags_only_slower_classes_that_matter():
    from zenith.bench.isa import flag_classes

    wide = {"conv 1x56x56": [2.0, 2.2, 2.1], "pool 1x56x56": [0.03, 0.03, 0.03], "gemm 128x384": [1.0, 1.0, 1.1]}
    avx2 = {"conv 1x56x56": [1.0, 1.0, 1.0], "pool 1x56x56": [0.01, 0.01, 0.01], "gemm 128x384": [2.0, 2.0, 2.0]}
    rows = flag_classes(wide, avx2)
    by = {r["class"]: r for r in rows}
    assert by["conv 1x56x56"]["flagged"] and abs(by["conv 1x56x56"]["ratio"] - 2.1) < 1e-9
    assert not by["pool 1x56x56"]["flagged"]  # 3x slower, but 1% of the time
    assert not by["gemm 128x384"]["flagged"]  # faster
    assert [r["class"] for r in rows] == ["pool 1x56x56", "conv 1x56x56", "gemm 128x384"]  # slowest-relative first
    assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-9


def test_isa_check_runs_both_paths_in_fresh_processes():
    from zenith import _C
    from zenith.bench import isa
    from zenith.bench.runner import Config

    cfg = Config(iterations=5, warmup=1, threads=2)
    cfg.extra.update(isa_models=["small-cnn"], isa_rounds=1)
    w = isa.isa_check(cfg)
    assert w["name"] == "isa-check" and w["results"]["zenith"]["status"] == "skipped"
    if not _C.sgemm_isa().startswith("avx512"):  # nothing wider than AVX2 here
        assert w["rows"] == [] and "nothing wider than AVX2" in w["results"]["zenith"]["reason"]
        return
    (row,) = w["rows"]
    assert row["isa"] == {"wide": _C.sgemm_isa(), "avx2": "avx2"}
    assert any(c["class"].startswith("conv2d_nchwc 1x32x32") and c["wide_ms"] > 0 and c["avx2_ms"] > 0
               for c in row["classes"]), row["classes"]
    assert isa.table_lines(w)[0].startswith("isa-check small-cnn")
