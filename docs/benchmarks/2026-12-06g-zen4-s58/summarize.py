"""Prints model_sweep.py's JSON lines a model a line; '!!' marks an error, a crash, a
timeout or a difference to eager past 1e-4 of the output's scale."""
import json
import sys

for line in open(sys.argv[1] if len(sys.argv) > 1 else "sweep.jsonl"):
    r = json.loads(line)
    if "crash" in r or "timeout" in r:
        print("!!", r)
        continue
    flag = "!!" if r["errors"] or r["max_rel_err"] > 1e-4 else "  "
    print(flag, r["model"], f"compile {r['compile_s']}s", f"rel_err {r['max_rel_err']:.1e}", r["errors"] or "",
          f"graphs {r['graphs']}", f"native {r['native']}/{r['nodes']}", r["fallbacks"] or "")
