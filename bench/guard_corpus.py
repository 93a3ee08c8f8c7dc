"""The accuracy guard on recorded runs: its false alarms on synchronous training's own noise, its verdicts on switches
that went wrong.

`python -m bench guard-corpus RUN_DIR... [--switch-at 0.25,0.32] [--set KEY=VALUE] [--out F]` replays every run
folder through the guard (syncswitch.cluster_manager.guard_replay), no cluster needed:

- a run that stayed synchronous, as though an asynchronous phase began at each `--switch-at`: any verdict there
  fires on BSP's own evaluations, a false alarm;
- a run that switched with its guard off, as it ran: a verdict there is what the guard would have done, and the
  run's final accuracy against the synchronous run of the same job, workers and seed says whether it should.

Both kinds are fed their scores where their checkpoints were written, as a watched phase's come in (such runs held
their checkpoints back and scored them after training). The runs are made by `syncswitch submit` (the figure's
command names them); `--set` tries other guard settings on the same runs.
"""

from __future__ import annotations

import argparse
import os
import sys

import yaml

from bench import common
from syncswitch.cluster_manager.guard_replay import replay_run
from syncswitch.errors import SpecError
from syncswitch.protocols.catalog import synchronous
from syncswitch.runfolder import RunFolderError, read_json, read_summary


def identity(run_dir: str) -> dict:
    """The run's job, workers, seed and whether it left synchronous training, from its job.json and summary."""
    summary = read_summary(run_dir).doc  # a folder that is no finished run: RunFolderError, naming it
    job = read_json(run_dir, "job.json")  # corrupt or unreadable: RunFolderError, naming it
    if job is None:
        raise RunFolderError(f"{run_dir}: no job.json (not a run folder)")
    raw = job.get("raw") or {}
    targets = [p.get("protocol", "bsp") for p in summary["schedule"] if not synchronous(p.get("protocol", "bsp"))]
    return {"run": os.path.basename(os.path.normpath(run_dir)), "job": summary["job"], "workers": summary["workers"],
            "seed": raw.get("seed", 0), "switched": bool(targets), "target": targets[0] if targets else None,
            "final_accuracy": summary.get("final_accuracy"),
            "guarded": bool((summary.get("guard") or {}).get("enabled"))}


def verdict_of(replay) -> dict | None:
    v = replay.verdict
    return None if v is None else {"reason": v.reason, "fraction": round(v.fraction, 4), "onset": round(v.onset, 4),
                                   "decided_at": round(replay.decided_at, 4)}


def replay_corpus(run_dirs: list[str], switch_at: list[float], overrides: dict) -> list[dict]:
    """One row per replay: every synchronous run at each pretended switch, every unguarded switched run as it ran."""
    rows = []
    for run_dir in run_dirs:
        info = identity(run_dir)
        if info["switched"]:
            if info["guarded"]:  # its own guard acted on what it saw: not a replay of an unwatched switch
                continue
            rows.append({**info, "switch_at": None, "verdict": verdict_of(replay_run(run_dir, overrides))})
        else:
            rows += [{**info, "switch_at": at, "verdict": verdict_of(replay_run(run_dir, overrides, as_switch_at=at))}
                     for at in switch_at]
    baseline = {(r["job"], r["workers"], r["seed"]): r["final_accuracy"] for r in rows if not r["switched"]}
    for row in rows:
        if row["switched"]:
            row["bsp_accuracy"] = baseline.get((row["job"], row["workers"], row["seed"]))
    return rows


def summarize(rows: list[dict]) -> dict:
    """Per job and workers: the false alarms among the pretended switches; per switched run, points below its seed's
    BSP and the verdict."""
    table: dict = {}
    for row in rows:
        cell = table.setdefault(f"{row['job']}-{row['workers']}", {"pretended": 0, "false_alarms": [], "switched": []})
        if row["switched"]:
            below = (None if row["bsp_accuracy"] is None or row["final_accuracy"] is None
                     else round((row["bsp_accuracy"] - row["final_accuracy"]) * 100, 1))
            cell["switched"].append({"seed": row["seed"], "target": row["target"], "points_below_bsp": below,
                                     "verdict": row["verdict"]})
        else:
            cell["pretended"] += 1
            if row["verdict"]:
                cell["false_alarms"].append({"seed": row["seed"], "switch_at": row["switch_at"], **row["verdict"]})
    return table


def _fractions(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise SpecError(f"--switch-at {text!r}: expected fractions, e.g. 0.25,0.32") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench guard-corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="run folders (syncswitch submit --output-dir)")
    parser.add_argument("--switch-at", default="0.25,0.32", help="pretended switches of the synchronous runs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a policy.guard setting")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    try:
        bad = next((item for item in args.set if "=" not in item), None)
        if bad is not None:
            raise SpecError(f"--set {bad!r}: expected KEY=VALUE, e.g. accuracy_drop=0.1")
        overrides = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.set)}
        switch_at = _fractions(args.switch_at)
        rows = replay_corpus(args.runs, switch_at, overrides)
    except (RunFolderError, SpecError) as exc:  # a folder that is no finished run, a bad --set: one line
        sys.stderr.write(f"python -m bench guard-corpus: {exc}\n")
        return 2
    doc = {"switch_at": switch_at, "overrides": overrides, "table": summarize(rows), "runs": rows,
           "machine": common.machine_facts(["guard-corpus", *(argv if argv is not None else sys.argv[1:])])}
    common.emit(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
