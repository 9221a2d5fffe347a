"""pytest plugin for `make test-sanitize` (loaded with `-p sanitized_c`): refuses to run
unless `zenith._C` is the sanitized build staged at $ZENITH_SANITIZED_PKG. A sanitizer run
that silently imported the normal build (the .venv's install) could not fail."""
import os

import pytest


def _check():
    import zenith._C

    pkg = os.environ.get("ZENITH_SANITIZED_PKG")
    if not pkg:
        raise pytest.UsageError("sanitized_c: ZENITH_SANITIZED_PKG is not set")
    path = os.path.realpath(zenith._C.__file__)
    if not path.startswith(os.path.realpath(pkg) + os.sep):
        raise pytest.UsageError(f"sanitized_c: zenith._C is {path}, not the sanitized build under {pkg}")
    with open(path, "rb") as f:
        blob = f.read()
    if b"__asan_init" not in blob or b"__ubsan_handle_" not in blob:
        raise pytest.UsageError(f"sanitized_c: {path} is not built with ASan and UBSan")
    if "libasan" not in open("/proc/self/maps").read():
        raise pytest.UsageError("sanitized_c: the ASan runtime is not loaded (LD_PRELOAD)")
    return path


def pytest_configure(config):
    config._zenith_sanitized_c = _check()


def pytest_report_header(config):
    return f"zenith._C (sanitized): {config._zenith_sanitized_c}"
