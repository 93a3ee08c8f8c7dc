"""A spec document: load a YAML file once, apply `--set` overrides, validate every section and across them."""

from __future__ import annotations

import copy
import os
from typing import Any

import yaml

from syncswitch.errors import SpecError
from syncswitch.spec.checks import check_across
from syncswitch.spec.faults import checkpoint_section, recovery_section
from syncswitch.spec.fields import check_keys, fail, mapping, number
from syncswitch.spec.model import JobSpec
from syncswitch.spec.policy import policy_section
from syncswitch.spec.script_check import check_script
from syncswitch.spec.sections import cluster_section, evaluation_section, hyperparameters_section, workload_section
from syncswitch.spec.stragglers import stragglers_section


TOP_KEYS = ("name", "script", "workdir", "params", "hyperparameters", "workload", "cluster", "policy",
            "evaluation", "seed", "stragglers", "checkpoint", "recovery")


def validate(doc: Any, path: str) -> JobSpec:
    """Validate a parsed spec document; `path` anchors the relative script path."""
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: a job spec must be a YAML mapping, got {type(doc).__name__}")
    check_keys(doc, TOP_KEYS, "")
    name = doc.get("name") or os.path.splitext(os.path.basename(path))[0]
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise fail("name", name, "use letters, digits, '-', '_' or '.'")
    script = doc.get("script")
    if not isinstance(script, str) or not script:
        raise SpecError(f"script is required: the path of the training script (relative to {path})")
    script_path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), script))
    if not os.path.isfile(script_path):
        raise fail("script", script, f"no such file {script_path}")
    workdir, workdir_given = workdir_field(doc, script_path, os.path.dirname(os.path.abspath(path)))
    params = mapping(doc.get("params"), "params")
    hyperparameters = hyperparameters_section(doc.get("hyperparameters"))
    workload = workload_section(doc.get("workload"))
    check_script(script_path, by_epochs=workload.epochs is not None)  # before any process starts
    cluster = cluster_section(doc.get("cluster"))
    # A run that expects stragglers switches where no worker waits for another (spec.policy.default_switch_to).
    straggling = doc.get("stragglers") if isinstance(doc.get("stragglers"), dict) else {}
    expects_stragglers = straggling.get("policy", "none") != "none" or bool({"inject", "scenario"} & set(straggling))
    policy = policy_section(doc.get("policy"), os.path.dirname(os.path.abspath(path)), cluster.workers,
                            stragglers=expects_stragglers)
    evaluation = evaluation_section(doc.get("evaluation"))
    seed = number(doc.get("seed", 0), "seed", lo=0, integer=True)
    job = JobSpec(
        name=name,
        script=script_path,
        workdir=workdir,
        workdir_given=workdir_given,
        params=params,
        hyperparameters=hyperparameters,
        workload=workload,
        cluster=cluster,
        policy=policy,
        evaluation=evaluation,
        seed=seed,
        path=os.path.abspath(path),
        raw=doc,
        # Expanded against the spec's schedule: a stored policy applied later does not move them.
        stragglers=stragglers_section(doc.get("stragglers"), cluster.workers, policy.schedule, seed,
                                      budgets=bool(cluster.options.get("cpus_per_node"))),
        checkpoint=checkpoint_section(doc.get("checkpoint")),
        recovery=recovery_section(doc.get("recovery")),
    )
    check_across(job)
    return job


def workdir_field(doc: dict, script_path: str, base: str) -> tuple[str | None, bool]:
    """The folder shipped to every node with the script, and whether the spec named it. Absent: the script's own
    folder; `null` or `false`: the script alone; a path (relative to the spec file): a folder holding the script."""
    if "workdir" not in doc:
        return os.path.dirname(script_path), False
    value = doc["workdir"]
    if value is None or value is False:
        return None, True
    if not isinstance(value, str) or not value:
        raise fail("workdir", value, "must be a folder holding the script, or null for the script alone")
    folder = os.path.normpath(os.path.join(base, value))
    if not os.path.isdir(folder):
        raise fail("workdir", value, f"no such folder {folder}")
    if os.path.commonpath([folder, script_path]) != folder:
        raise fail("workdir", value, f"must hold the script {script_path}: it is shipped with the folder")
    return folder, True


def apply_override(doc: dict, assignment: str) -> None:
    """Apply one `dotted.key=value` override; the value is parsed as YAML."""
    if "=" not in assignment:
        raise SpecError(f"--set {assignment!r}: expected dotted.key=value")
    key, _, text = assignment.partition("=")
    parts = key.strip().split(".")
    if not all(parts):
        raise SpecError(f"--set {assignment!r}: empty key segment")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"--set {key}: value {text!r} is not valid YAML ({exc.__class__.__name__})") from None
    node = doc
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise SpecError(f"--set {key}: {'.'.join(parts[:i + 1])} is not a mapping")
        node = child
    node[parts[-1]] = value
    # The schedule's two spellings are exclusive in a file, but an override of one replaces the
    # other: `--switch-at 0.4` on a job whose file has a schedule means "use this switch point".
    replaced = {"policy.switch_at": "schedule", "policy.schedule": "switch_at"}.get(key.strip())
    if replaced:
        dropped = node.pop(replaced, None)
        target = _switch_target_item(dropped) if replaced == "schedule" else None
        # ... and keeps the schedule's own switch target: `[bsp until F, X]` moved to 0.4 still switches to X.
        if target is not None and "switch_to" not in node:
            node["switch_to"] = target
    # `--switch-to asp` on a job whose file says `[bsp until F, X]` means: switch at F, to asp.
    schedule = node.get("schedule")
    if (key.strip() == "policy.switch_to" and _switch_target_item(schedule) is not None
            and set(schedule[0]) <= {"protocol", "until"}):  # a BSP phase with parameters stays as written
        node["switch_at"] = node.pop("schedule")[0].get("until")


def _switch_target_item(schedule: Any) -> dict | None:
    """X (its mapping, `until` dropped) of a `[{protocol: bsp, until: F}, X]` schedule as written; None otherwise."""
    if (isinstance(schedule, list) and len(schedule) == 2 and all(isinstance(p, dict) for p in schedule)
            and schedule[0].get("protocol") == "bsp" and schedule[1].get("protocol") not in (None, "bsp")):
        return {k: v for k, v in schedule[1].items() if k != "until"}
    return None


def load(path: str, overrides: list[str] | tuple[str, ...] = ()) -> JobSpec:
    """Read, override and validate a job spec file."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such job spec file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise SpecError(f"{path}:{where} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    doc = copy.deepcopy(doc) if isinstance(doc, dict) else doc
    if isinstance(doc, dict):
        for assignment in overrides:
            apply_override(doc, assignment)
    return validate(doc, path)
