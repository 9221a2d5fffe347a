"""Zenith's log: the "zenith" logger, a component of PyTorch's logging.

    TORCH_LOGS=zenith    the compile summary per graph (nodes native, segments,
                         fallback op types) and one line per op type that falls back
    TORCH_LOGS=+zenith   also debug lines: each segment's Zenith IR after the passes
    ZENITH_LOG=info      the same as TORCH_LOGS=zenith (ZENITH_LOG=debug: +zenith);
                         where TORCH_LOGS names zenith too, TORCH_LOGS decides

The log is registered with torch._logging, so torch._logging.set_logs(modules=
{"zenith": logging.INFO}) works too. PyTorch reads TORCH_LOGS when torch is imported,
before Zenith can register anything; it then takes "zenith" as a module name (the
same logger), so the variable works whichever of torch and zenith is imported first.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger("zenith")

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def setup():
    """Registers the log with PyTorch and applies ZENITH_LOG."""
    from torch._logging import _internal

    _internal.register_log("zenith", "zenith")
    value = os.environ.get("ZENITH_LOG", "").strip()
    if not value:
        return
    level = LEVELS.get(value.lower())
    if level is None:
        raise ValueError(f"ZENITH_LOG={value!r} is not a log level; use one of {', '.join(LEVELS)} "
                         "(or TORCH_LOGS=zenith / +zenith)")
    if _torch_logs_names_zenith():
        # PyTorch sets this logger up, possibly after this import returns (when torch's
        # own import is what imported zenith, to resolve the name); a second handler
        # would print every line twice.
        return
    log.setLevel(level)
    # The handler TORCH_LOGS=zenith gets: PyTorch's format, marked as PyTorch's so a
    # later set_logs replaces it rather than doubling it.
    _internal._setup_handlers(_internal._StderrHandler, log)


def _torch_logs_names_zenith():
    names = (n.strip().lstrip("+-") for n in os.environ.get("TORCH_LOGS", "").split(","))
    return any(n == "zenith" or n.startswith("zenith.") for n in names)
