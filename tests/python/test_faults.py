"""Faults a serving process meets, and what a compiled model must do after them:
an allocation that fails (a MemoryError, then the model answers right once memory is
back), a KeyboardInterrupt during a call (the model stays usable, no context leaks,
no deadlock), and a weight changed in place between calls (every path that keeps a
weight across calls sees the change). Answers are compared with eager."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import zenith

CONV_TOL = dict(rtol=1e-4, atol=1e-4)
GEMM_TOL = dict(rtol=1e-4, atol=1e-5)


def _run_script(code, timeout=300):
    """Runs `code` in a fresh interpreter; returns its stdout (the test fails on a
    non-zero exit, a crash included)."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    print(r.stdout)
    return r.stdout


# -- allocation failure ------------------------------------------------------------

_OOM_SCRIPT = """
import resource, torch, zenith

def vm_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize"):
            return int(line.split()[1]) * 1024

def under_limit(headroom, fn):
    # Address space capped at what the process maps now plus `headroom`, then lifted.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + headroom, hard))
    try:
        fn()
    except MemoryError as e:
        return str(e)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return None

def close(a, b, tol=1e-4):
    return torch.allclose(a, b, rtol=tol, atol=tol)

torch.manual_seed(0)
MiB = 1 << 20
with torch.no_grad():
    # 1. The arena: 100,000 rows make a 1.6 GB intermediate.
    m = torch.nn.Sequential(torch.nn.Linear(64, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 8)).eval()
    c = zenith.compile(m, dynamic=True)
    small, big = torch.randn(16, 64), torch.randn(100_000, 64)
    c(small); c(torch.randn(17, 64))
    err = under_limit(256 * MiB, lambda: c(big))
    print("arena:", err)
    assert err and "out of memory" in err, err
    assert close(c(small), m(small)) and close(c(big[:3000]), m(big[:3000]))

    # 2. A kernel's scratch: the GEMM packs all of A (6000 x 8192, 197 MB) per call.
    class RowMajor(torch.nn.Module):
        def __init__(self, k, n):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(k, n) * k ** -0.5)
        def forward(self, x):
            return x @ self.w
    m = RowMajor(8192, 1100).eval()
    c = zenith.compile(m, dynamic=True, pack_weights=False)
    small, big = torch.randn(300, 8192), torch.randn(6000, 8192)
    c(small); c(torch.randn(301, 8192))
    err = under_limit(100 * MiB, lambda: c(big))
    print("scratch:", err)
    assert err and "out of memory" in err, err
    assert close(c(small), m(small)) and close(c(big), m(big))  # (small used to crash: a null scratch buffer)

    # 3. A packed weight: 4096 x 4096 (64 MB) packed on the first call of 64 rows
    # (4 rows stream the weight in place and pack nothing).
    m = RowMajor(4096, 4096).eval()
    c = zenith.compile(m, dynamic=True)
    few, x = torch.randn(4, 4096), torch.randn(64, 4096)
    c(few); c(torch.randn(3, 4096))
    err = under_limit(32 * MiB, lambda: c(x))
    print("packed weight:", err)
    assert err and "out of memory" in err, err
    assert close(c(x), m(x)) and close(c(few), m(few))

    # 4. Winograd filters (16 x 1024 x 1024 floats, 64 MB), transformed again after the
    # kept ones are dropped (as an in-place weight update would).
    m = torch.nn.Sequential(torch.nn.Conv2d(1024, 1024, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 1024, 8, 8)
    with zenith.backend.collect_reports() as reports:
        c = torch.compile(m, backend="zenith")
        c(x)
    assert sum(r.packed_weight_bytes for r in reports) > 0
    for r in reports:
        for e in r.executables:
            e.drop_packed()
    err = under_limit(24 * MiB, lambda: c(x))
    print("winograd filters:", err)
    assert err and "out of memory" in err, err
    assert close(c(x), m(x))
print("OK")
"""


def test_failed_allocations_raise_memory_error_and_the_model_recovers():
    """Under `ulimit -v` (RLIMIT_AS, set after import and compile): the arena, a
    kernel's scratch buffer, a packed weight and Winograd filters each fail to
    allocate; every one is a MemoryError naming the size, and once the limit is
    lifted the same compiled model answers right (the scratch case used to crash)."""
    out = _run_script(_OOM_SCRIPT)
    assert out.strip().endswith("OK")


def test_an_impossible_allocation_is_a_memory_error_in_process():
    """The same without a limit: a shape whose arena, or output, no machine has (2^54
    bytes) raises MemoryError before any kernel reads the input; the executable's
    context goes back to its pool and the next call answers right."""
    from zenith import _C

    g = _C.Graph()
    x = g.add_input("x", "f32", ["s0", 4])
    y = g.add_node("neg", [x], {})[0]  # an intermediate: lives in the arena
    g.set_outputs([g.add_node("exp", [y], {})[0]])
    exe = _C.Executable(g)
    t = torch.randn(3, 4)
    for rows in (1 << 50, 1 << 49):
        with pytest.raises(MemoryError, match="out of memory allocating"):
            exe.run_raw([(t.data_ptr(), 0, (rows, 4))], [])
        (out,) = exe.run_raw([(t.data_ptr(), 0, (3, 4))], [])
        torch.testing.assert_close(out, torch.exp(-t))


def test_run_raw_takes_bare_pointers_for_static_inputs_only():
    """run_raw's fast form for parameters: a bare data pointer stands for a tensor of the
    compiled dtype and static shape; for an input of symbolic shape it is a clear error,
    as are more inputs than the graph has."""
    from zenith import _C

    g = _C.Graph()
    x = g.add_input("x", "f32", ["s0", 4])
    w = g.add_input("w", "f32", [4])
    g.set_outputs([g.add_node("mul", [x, w], {})[0]])
    exe = _C.Executable(g)
    t, v = torch.randn(3, 4), torch.randn(4)
    (out,) = exe.run_raw([(t.data_ptr(), 0, (3, 4)), v.data_ptr()], [])
    torch.testing.assert_close(out, t * v)
    with pytest.raises(RuntimeError, match="bare pointer but its shape is symbolic"):
        exe.run_raw([t.data_ptr(), v.data_ptr()], [])
    with pytest.raises(RuntimeError, match="3 inputs for a graph of 2"):
        exe.run_raw([(t.data_ptr(), 0, (3, 4)), (v.data_ptr(), 0, (4,)), v.data_ptr()], [])


# -- KeyboardInterrupt -------------------------------------------------------------

_INTERRUPT_SCRIPT = """
import os, signal, threading, time, torch, zenith

# Ctrl-C as a user's interpreter has it: a process started in the background by a
# non-interactive shell (as CI jobs can be) inherits SIGINT ignored, and Python keeps it so.
signal.signal(signal.SIGINT, signal.default_int_handler)
torch.manual_seed(0)
STOP = [False]

@torch.library.custom_op("zenith_faults::maybe_stop", mutates_args=())
def maybe_stop(x: torch.Tensor) -> torch.Tensor:
    if STOP[0]:
        raise KeyboardInterrupt  # as Ctrl-C would, raised between two Zenith segments
    return x.clone()

@maybe_stop.register_fake
def _(x):
    return torch.empty_like(x)

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(512, 2048)
        self.b = torch.nn.Linear(2048, 512)
        self.c = torch.nn.Linear(512, 64)
    def forward(self, x):
        y = torch.relu(self.a(x))
        y = maybe_stop(self.b(y))  # a PyTorch op between segments
        return self.c(torch.tanh(y))

m = M().eval()
c = zenith.compile(m)
x = torch.randn(256, 512)
with torch.no_grad():
    want = m(x)
    assert torch.allclose(c(x), want, rtol=1e-4, atol=1e-5)
    t0 = time.perf_counter(); c(x); call = time.perf_counter() - t0
    print(f"one call {call * 1e3:.1f} ms")

    # 1. raised by a PyTorch op between segments
    STOP[0] = True
    try:
        c(x)
        raise SystemExit("no KeyboardInterrupt")
    except KeyboardInterrupt:
        pass
    STOP[0] = False
    assert torch.allclose(c(x), want, rtol=1e-4, atol=1e-5)

    # 2. SIGINT at spread-out moments of a call: inside a native segment (GIL
    # released: it ends, then Python raises), between segments, in Dynamo's wrappers.
    interrupted = 0
    for k in range(12):
        go = threading.Event()
        def fire(delay=call * k / 12):
            go.wait()
            time.sleep(delay)
            os.kill(os.getpid(), signal.SIGINT)
        sender = threading.Thread(target=fire)
        sender.start()
        try:
            try:
                go.set()
                c(x)
            finally:
                sender.join()
                time.sleep(0.02)  # a signal that arrived after the call is raised here
        except KeyboardInterrupt:
            interrupted += 1
        sender.join()
        assert torch.allclose(c(x), want, rtol=1e-4, atol=1e-5), k

    # 3. the model still serves two threads at once (no context leaked, no lock held)
    errors = []
    def worker():
        for _ in range(20):
            if not torch.allclose(c(x), want, rtol=1e-4, atol=1e-5):
                errors.append("mismatch")
    threads = [threading.Thread(target=worker) for _ in range(2)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors, errors
print(f"interrupted {interrupted}/12 calls, graphs {zenith.stats()['graphs_compiled']}")
assert interrupted == 12, f"a Ctrl-C was swallowed: {interrupted}/12 calls interrupted"
print("OK")
"""


def test_keyboard_interrupt_leaves_the_compiled_model_usable():
    """Ctrl-C raised from a PyTorch fallback op between segments, and SIGINT delivered
    at 12 moments spread over a call (native segments run with the GIL released); after
    each, the model answers right, and then from two threads at once."""
    out = _run_script(_INTERRUPT_SCRIPT)
    assert out.strip().endswith("OK")


# -- weights changed in place between calls ----------------------------------------

class _RowMajor(torch.nn.Module):
    """x @ W + b with W stored [in, out] (GPT-2's Conv1D layout): the GEMM packs W."""

    def __init__(self, k=64, n=96):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(k, n) * k ** -0.5)
        self.b = torch.nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.addmm(self.b, x, self.w)


def _weight_cache_cases():
    """(name, model, input, tolerance): one per path that keeps a weight across calls."""
    torch.manual_seed(0)
    return [
        ("conv filters packed (GEMM A)", torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU()),
         torch.randn(1, 3, 24, 20), CONV_TOL),
        ("conv filters packed, batch of small maps", torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3)),
         torch.randn(3, 8, 9, 9), CONV_TOL),
        # one image whose 17 output pixels pad less as micro-kernel rows than as column
        # panels (AVX2 and AVX-512): filters kept packed as B (W^T)
        ("pixel-rows filters packed (GEMM B)", torch.nn.Sequential(torch.nn.Conv2d(32, 48, 3)),
         torch.randn(1, 32, 3, 19), CONV_TOL),
        ("Winograd-transformed filters", torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()),
         torch.randn(1, 64, 8, 8), CONV_TOL),
        ("row-major matmul weight packed (Conv1D)", _RowMajor(), torch.randn(40, 64), GEMM_TOL),
    ]


def _mutations():
    """Ways a user changes weights in place between calls; each bumps PyTorch's version
    counter (writes through `.data` do not and are documented as not seen)."""

    def copy_no_grad(m):
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn_like(p) * p.std())

    def load_state_dict(m):
        sd = {k: torch.randn_like(v) * v.std() for k, v in m.state_dict().items()}
        m.load_state_dict(sd)

    def optimizer_step(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for p in m.parameters():
            p.grad = torch.randn_like(p)
        opt.step()

    def inference_mode_inplace(m):  # weights that are inference tensors, changed inside inference_mode
        with torch.inference_mode():
            for p in m.parameters():
                p.mul_(-1.5)

    return {"copy_": copy_no_grad, "load_state_dict": load_state_dict, "optimizer step": optimizer_step,
            "in place under inference_mode": inference_mode_inplace}


@pytest.mark.parametrize("mutation", list(_mutations()))
def test_weights_changed_in_place_between_calls_are_seen(mutation):
    """Every cache of a weight (packed conv filters, pixel-rows filters, Winograd
    filters, packed row-major matmul weights) follows in-place updates: copy_ under
    no_grad, load_state_dict, an optimizer step, and, for a model whose weights are
    inference tensors, an in-place op inside inference_mode."""
    mutate = _mutations()[mutation]
    for name, m, x, tol in _weight_cache_cases():
        torch._dynamo.reset()
        m.eval()
        if mutation == "in place under inference_mode":
            with torch.inference_mode():  # the weights become inference tensors (no version counter)
                m = copy.deepcopy(m)
                for p in m.parameters():
                    assert p.is_inference()
        with zenith.backend.collect_reports() as reports:
            c = zenith.compile(m)
            for step in range(3):
                with torch.no_grad():
                    torch.testing.assert_close(c(x), m(x), **tol, msg=lambda s: f"{name}, call {step}: {s}")
                    packed = sum(r.packed_weight_bytes for r in reports)
                # kept packed unless inference tensors (whose changes cannot be seen)
                assert (packed == 0) == (mutation == "in place under inference_mode"), (name, packed)
                mutate(m)


def test_a_replaced_weight_is_seen(tmp_path):
    """Parameters replaced by new tensors (load_state_dict(assign=True), attribute
    assignment) are read from their new place, packed anew; also a replacement at the
    very address of the weight packed last, with the same version: checkpoints loaded
    with mmap=True twice between calls map the third file where the first was (this
    served the first file's packed weights)."""
    m, x = _RowMajor(512, 512).eval(), torch.randn(64, 512)
    c = zenith.compile(m)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
            m.load_state_dict({k: torch.randn_like(v) / 23 for k, v in m.state_dict().items()}, assign=True)
        m.w = torch.nn.Parameter(torch.randn(512, 512) / 23)
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        files = []
        for k in range(3):
            files.append(tmp_path / f"ckpt{k}.pt")
            torch.save({k: torch.randn_like(v) / 23 for k, v in m.state_dict().items()}, files[-1])
        same_address = 0
        for _ in range(4):
            m.load_state_dict(torch.load(files[0], mmap=True), assign=True)
            first = (m.w.data_ptr(), m.w._version)
            torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
            m.load_state_dict(torch.load(files[1], mmap=True), assign=True)
            m.load_state_dict(torch.load(files[2], mmap=True), assign=True)
            same_address += (m.w.data_ptr(), m.w._version) == first
            torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        print(f"\n[replaced weights] the third checkpoint landed on the first's address, same version: "
              f"{same_address}/4 times")


def test_new_storage_at_the_old_address_is_seen():
    """module.to(bfloat16).to(float32) gives each parameter new storage under the same
    tensor, version unchanged, values rounded; the new float32 storage often lands where
    the old one was (in runs here up to 3 of 20 models, varying with the allocator's
    state), and the packed copy of the old values was served. Made certain below by two storages over one buffer, as a new checkpoint
    mapped where the last one was: assigned through `.data =` and as a new Parameter."""
    x = torch.randn(64, 128)
    same = 0
    with torch.no_grad():
        for _ in range(20):
            m = _RowMajor(128, 128).eval()
            c = torch.compile(m, backend="zenith")
            c(x)
            first = (m.w.data_ptr(), m.w._version)
            m.to(torch.bfloat16).to(torch.float32)
            same += (m.w.data_ptr(), m.w._version) == first
            torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        print(f"\n[dtype round trip] new float32 storage at the old address: {same}/20 models")

        m = _RowMajor(128, 128).eval()
        c = torch.compile(m, backend="zenith")
        buf = bytearray(128 * 128 * 4)

        def over_buf(values):  # a new tensor (and storage) over the same memory
            torch.frombuffer(buf, dtype=torch.float32).copy_(values.flatten())
            return torch.frombuffer(buf, dtype=torch.float32).view(128, 128)

        m.w.data = over_buf(torch.randn(128, 128) / 11)
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        m.w.data = over_buf(torch.randn(128, 128) / 11)  # same tensor, same address, same version
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        m.w = torch.nn.Parameter(over_buf(torch.randn(128, 128) / 11))  # a new Parameter there
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)


def test_a_weight_changed_while_nothing_was_packed_is_seen():
    """Per call the weight check reads nothing while no segment holds a packed weight
    (few-row GEMMs stream row-major weights in place); the versions it compares later
    are those of its last full check, so a change made in between still drops a copy
    packed after it. One graph (dynamic rows): 2 rows pack nothing, 40 rows pack W."""
    m = _RowMajor(128, 128).eval()
    few, many = torch.randn(2, 128), torch.randn(40, 128)
    with torch.no_grad(), zenith.backend.collect_reports() as reports:
        c = zenith.compile(m, dynamic=True)
        torch.testing.assert_close(c(few), m(few), **GEMM_TOL)
        assert len(reports) == 1 and reports[0].packed_weight_bytes == 0
        m.w.mul_(-2)  # nothing packed: not looked at now
        torch.testing.assert_close(c(many), m(many), **GEMM_TOL)  # packs the changed W
        assert reports[0].packed_weight_bytes == 128 * 128 * 4
        m.w.add_(0.5)
        torch.testing.assert_close(c(few), m(few), **GEMM_TOL)
        torch.testing.assert_close(c(many), m(many), **GEMM_TOL)
        m.w.mul_(3)
        torch.testing.assert_close(c(many), m(many), **GEMM_TOL)
        assert len(reports) == 1


def test_a_weight_viewed_differently_under_the_same_tensor_is_seen():
    """A call passes each parameter's compiled dtype and shape and reads only its data
    pointer (Dynamo guards their layout and recompiles when it changes). `.data =` a
    transpose of its own storage keeps the address and the version: the compiled model
    must follow it anyway, and back."""
    m, x = _RowMajor(96, 96).eval(), torch.randn(40, 96)
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        ptr, version = m.w.data_ptr(), m.w._version
        m.w.data = m.w.data.t()
        assert (m.w.data_ptr(), m.w._version) == (ptr, version) and not m.w.is_contiguous()
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        m.w.data = m.w.data.t()
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)


def test_in_place_change_of_tensor_attributes_and_globals_is_seen():
    """Tensors the graph reads that are not parameters (a plain tensor attribute, a
    module-level global, a closure's tensor, a plain object's), big enough for the
    packed GEMM. (The graph borrows as constants only tensors made in the forward
    from literals, which no caller can reach.)"""
    g = torch.randn(96, 48)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.plain = torch.randn(64, 96)  # neither a parameter nor a buffer

        def forward(self, x):
            return (x @ self.plain) @ g

    m, x = M().eval(), torch.randn(40, 64)
    c = zenith.compile(m)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        m.plain.mul_(-2)
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)
        g.copy_(torch.randn(96, 48))
        torch.testing.assert_close(c(x), m(x), **GEMM_TOL)

    def make():  # a tensor captured by a closure, and one held by a plain object
        w = torch.randn(64, 96) / 8
        holder = type("Holder", (), {})()
        holder.v = torch.randn(96, 48) / 10

        def f(x):
            return (x @ (w * 2)) @ holder.v.t().t() + w.sum()
        return f, w, holder

    f, w, holder = make()
    cf = zenith.compile(f)
    with torch.no_grad():
        torch.testing.assert_close(cf(x), f(x), **GEMM_TOL)
        w.mul_(-1)
        holder.v.add_(0.5)
        torch.testing.assert_close(cf(x), f(x), **GEMM_TOL)
