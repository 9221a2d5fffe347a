"""One fuzzing session in its own process (test_fuzz.py runs several side by side, so a
crash cannot take the test runner down and both cores work).

    python fuzz_worker.py --seed 1 --graphs 1000 --json out.json [--open]

Runs Hypothesis over `programs.draw_program` with the given seed; writes the hit counts
and the failure (the shrunk program as a `Program(...)` literal) as JSON. Before each
case the program is also written to $ZENITH_FUZZ_CURRENT, which is the repro when the
process dies of a signal.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hypothesis  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import programs  # noqa: E402


def session(seed, graphs, open_ended):
    phases = [Phase.explicit, Phase.generate, Phase.shrink]
    database = None
    if open_ended:
        phases.insert(1, Phase.reuse)
        database = hypothesis.database.DirectoryBasedExampleDatabase(
            os.environ.get("ZENITH_FUZZ_DB", ".hypothesis/zenith-fuzz"))

    @hypothesis.seed(seed)
    @settings(max_examples=graphs, deadline=None, database=database, phases=phases,
              suppress_health_check=list(HealthCheck), derandomize=False, print_blob=True)
    @given(st.data())
    def case(data):
        prog = programs.draw_program(data)
        try:
            programs.run_case(prog)
        except programs.Invalid:
            hypothesis.reject()
        except Exception as e:
            raise AssertionError(f"{type(e).__name__}: {e}\n\nrepro:\n{prog!r}") from e

    try:
        case()
    except Exception as e:  # an ExceptionGroup when Hypothesis found several distinct failures
        parts = getattr(e, "exceptions", None) or [e]
        return "\n\n".join(f"{type(x).__name__}: {x}" for x in parts)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--graphs", type=int, required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--open", action="store_true", help="open-ended: keep Hypothesis' example database")
    a = ap.parse_args()
    failure = session(a.seed, a.graphs, a.open)
    with open(a.json, "w") as f:
        json.dump({"seed": a.seed, "counts": dict(programs.COUNTS), "failure": failure}, f)
    if failure:
        print(failure, file=sys.stderr)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
