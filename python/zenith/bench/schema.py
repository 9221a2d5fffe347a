"""The result file: versioned JSON with every raw sample and the machine it came from."""
from __future__ import annotations

SCHEMA = "zenith-bench/1"
STATUSES = ("ok", "skipped", "failed")


class SchemaError(ValueError):
    pass


def _need(d, key, typ, where):
    if key not in d:
        raise SchemaError(f"{where}: missing '{key}'")
    if not isinstance(d[key], typ):
        raise SchemaError(f"{where}: '{key}' should be {typ}, is {type(d[key]).__name__}")
    return d[key]


def validate(doc):
    """Raises SchemaError describing the first problem; returns doc when valid."""
    if not isinstance(doc, dict):
        raise SchemaError("result: not an object")
    if doc.get("schema") != SCHEMA:
        raise SchemaError(f"result: schema is {doc.get('schema')!r}, expected {SCHEMA!r}")
    _need(doc, "created", str, "result")
    machine = _need(doc, "machine", dict, "result")
    for k in ("cpu", "threads", "torch", "zenith_commit"):
        if k not in machine:
            raise SchemaError(f"machine: missing '{k}'")
    _need(doc, "config", dict, "result")
    for i, w in enumerate(_need(doc, "workloads", list, "result")):
        where = f"workloads[{i}]"
        _need(w, "name", str, where)
        _need(w, "params", dict, where)
        for fw, r in _need(w, "results", dict, where).items():
            rw = f"{where}.results.{fw}"
            status = _need(r, "status", str, rw)
            if status not in STATUSES:
                raise SchemaError(f"{rw}: status {status!r}")
            if status != "ok":
                _need(r, "reason", str, rw)
                continue
            samples = _need(r, "samples_s", list, rw)
            if not samples or not all(isinstance(x, (int, float)) and x > 0 for x in samples):
                raise SchemaError(f"{rw}: samples_s must be positive numbers")
            _need(r, "latency", dict, rw)
            _need(r, "agreement", dict, rw)
    return doc
