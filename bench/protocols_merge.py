"""Merge protocol-benchmark rounds (one process per seed, same job) into one results file:
`python bench/protocols_merge.py OUT.json ROUND.json...`; second-phase runs with the guard on are kept apart."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import common  # noqa: E402
from bench import protocols as P  # noqa: E402

rounds = [a for a in sys.argv[2:] if os.path.exists(a)]
merged = {}
notes = []
for path in rounds:
    doc = json.load(open(path))
    guard_off = "policy.guard=false" in doc.get("overrides", [])
    for v, r in doc["jobs"]["quickstart"]["variants"].items():
        name = v if (guard_off or ">" not in v) else f"{v} (guard on)"
        merged.setdefault(name, []).extend(r["runs"])
    notes.append({"file": path, "overrides": doc.get("overrides"), "first_seed": doc.get("first_seed", 0)})
def fix(run):
    """Phases run, rollbacks, and the measured staleness of the variant's own protocol, from the run's summary."""
    path = os.path.join(run["run_dir"], "summary.json")
    if not os.path.exists(path):
        return run
    phases = json.load(open(path)).get("schedule") or []
    run["phases"] = [p["protocol"] for p in phases]
    run["rollbacks"] = sum(1 for p in phases if p.get("rolled_back_to") is not None)
    measured = [p["measured"] for p in phases if (p.get("measured") or {}).get("staleness_mean") is not None]
    run["staleness_mean"] = measured[0]["staleness_mean"] if measured else None
    run["aborted_steps"] = measured[0].get("aborted_steps") if measured else None
    return run

merged = {v: [fix(r) for r in rs] for v, rs in merged.items()}
order = list(P.PROTOCOLS)
order += [f"bsp>{p}" for p in order[1:]] + [f"bsp>{p} (guard on)" for p in order[1:]]
results = {v: dict(P.stats(merged[v]), runs=merged[v]) for v in order if v in merged}
out = {"workers": 4, "repeats": max(len(r) for r in merged.values()), "rounds": notes,
       "command": "python bench/protocols.py --job jobs/quickstart.yaml --workers 4 --repeats 1 --first-seed K "
                  "[--variants ...] [--set policy.guard=false], one process per seed, merged",
       "machine": common.machine_facts(),
       "jobs": {"quickstart": {"job": "jobs/quickstart.yaml", "variants": results, "verdict": P.verdict(results)}}}
common.write_json(sys.argv[1], out)
print("\n".join(P.markdown(out)))
print(json.dumps(out["jobs"]["quickstart"]["verdict"], indent=1))
for v, r in results.items():
    print(v, [(x["seed"], x["status"], x.get("phases"), x.get("rollbacks")) for x in r["runs"]])
