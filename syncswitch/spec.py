"""Job spec: load a YAML file once, apply CLI overrides, validate everything, return dataclasses."""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import random
from typing import Any

import yaml

from syncswitch.cluster_manager import profiler
from syncswitch.errors import SpecError
from syncswitch.registry import did_you_mean

PROTOCOLS = ("bsp", "asp")
SWITCH_MODES = ("in-place", "relaunch")
DEFAULT_SWITCH_AT = 0.25
SLOWDOWN_METHODS = ("delay", "netem")
# Paper VI-B3: mild = 1 straggler, 1 occurrence, 10 ms; moderate = 2 stragglers, 4 occurrences,
# 30 ms. The paper gives no duration, only a 100 s cap per occurrence; 20 s lets several
# occurrences fit in the BSP share of a short job. A mapping scenario starts from its `preset`
# (default mild) and overrides fields of it.
SCENARIO_PRESETS = {
    "mild": {"stragglers": 1, "occurrences": 1, "delay_ms": 10.0, "duration_s": 20.0},
    "moderate": {"stragglers": 2, "occurrences": 4, "delay_ms": 30.0, "duration_s": 20.0},
}


@dataclasses.dataclass(frozen=True)
class LrDecay:
    boundaries: tuple[float, ...] = ()
    factors: tuple[float, ...] = ()

    def factor_at(self, fraction: float) -> float:
        out = 1.0
        for b, f in zip(self.boundaries, self.factors):
            if fraction >= b:
                out = f
        return out


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
    batch_size: int
    learning_rate: float
    momentum: float = 0.9
    lr_decay: LrDecay = LrDecay()


@dataclasses.dataclass(frozen=True)
class Phase:
    protocol: str
    until: float  # end of the phase as a fraction of the workload; 1.0 for the last


@dataclasses.dataclass(frozen=True)
class PolicySpec:
    schedule: tuple[Phase, ...]
    switch_mode: str = "in-place"
    configuration: str = "paper"
    source: str = "spec"  # where the schedule came from: spec | default | store | cli


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    backend: str
    workers: int
    options: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    epochs: float | None = None
    samples: int | None = None


@dataclasses.dataclass(frozen=True)
class EvaluationSpec:
    every: float = 0.05
    target_accuracy: float | None = None
    batch_size: int = 500


@dataclasses.dataclass(frozen=True)
class Injection:
    """Slow `worker` down by `delay_ms` for `duration_s` seconds from fraction `at` of the workload.

    Starts are fractions and durations seconds, so the spec cannot rule out that two slowdowns of
    one worker overlap in time; the injector starts one that comes due while the same worker is
    still slowed when that slowdown ends.
    """

    worker: int
    at: float
    duration_s: float
    delay_ms: float


@dataclasses.dataclass(frozen=True)
class StragglerSpec:
    """The `stragglers` section: how to react to stragglers, how to detect them, what to inject."""

    policy: str = "none"
    window_s: float = profiler.DEFAULT_WINDOW_S
    consecutive: int = profiler.DEFAULT_CONSECUTIVE
    method: str = "delay"       # delay: per-step sleep on the worker; netem: tc netem in the node's netns
    injections: tuple[Injection, ...] = ()  # ordered by start
    min_gap: float = profiler.DEFAULT_MIN_GAP


@dataclasses.dataclass(frozen=True)
class JobSpec:
    name: str
    script: str  # absolute path
    params: dict
    hyperparameters: Hyperparameters
    workload: WorkloadSpec
    cluster: ClusterSpec
    policy: PolicySpec
    evaluation: EvaluationSpec
    seed: int
    path: str  # the spec file, absolute
    raw: dict  # the validated document after overrides, for the summary and signatures
    stragglers: StragglerSpec = StragglerSpec()

    def with_policy(self, policy: PolicySpec) -> "JobSpec":
        return dataclasses.replace(self, policy=policy)


# ----------------------------------------------------------------------------- field checks

def _fail(field: str, value: Any, why: str) -> SpecError:
    return SpecError(f"{field}={value!r}: {why}")


def _number(value: Any, field: str, *, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(field, value, "must be a number")
    if integer and (not float(value).is_integer()):
        raise _fail(field, value, "must be an integer")
    if not math.isfinite(value):
        raise _fail(field, value, "must be finite")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise _fail(field, value, f"must be {'>' if lo_open else '>='} {lo}")
    if hi is not None and value > hi:
        raise _fail(field, value, f"must be <= {hi}")
    return int(value) if integer else float(value)


def _mapping(value: Any, field: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(field, value, "must be a mapping")
    return value


def _check_keys(doc: dict, allowed: tuple[str, ...], prefix: str) -> None:
    for key in doc:
        if key not in allowed:
            name = f"{prefix}{key}"
            raise SpecError(f"unknown key {name}{did_you_mean(key, allowed)}; valid: {', '.join(allowed)}")


def _fraction_list(value: Any, field: str) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)):
        raise _fail(field, value, "must be a list")
    return tuple(_number(v, f"{field}[{i}]", lo=0.0, hi=1.0) for i, v in enumerate(value))


# ----------------------------------------------------------------------------- sections

def _hyperparameters(doc: Any) -> Hyperparameters:
    doc = _mapping(doc, "hyperparameters")
    _check_keys(doc, ("batch_size", "learning_rate", "momentum", "lr_decay"), "hyperparameters.")
    for key in ("batch_size", "learning_rate"):
        if key not in doc:
            raise SpecError(f"hyperparameters.{key} is required")
    decay = _mapping(doc.get("lr_decay"), "hyperparameters.lr_decay")
    _check_keys(decay, ("boundaries", "factors"), "hyperparameters.lr_decay.")
    boundaries = _fraction_list(decay.get("boundaries", []), "hyperparameters.lr_decay.boundaries")
    factors = tuple(_number(v, f"hyperparameters.lr_decay.factors[{i}]", lo=0.0, lo_open=True)
                    for i, v in enumerate(decay.get("factors", []) or []))
    if len(boundaries) != len(factors):
        raise _fail("hyperparameters.lr_decay.factors", list(factors),
                    f"needs one factor per boundary ({len(boundaries)})")
    if list(boundaries) != sorted(set(boundaries)):
        raise _fail("hyperparameters.lr_decay.boundaries", list(boundaries), "must be strictly increasing")
    return Hyperparameters(
        batch_size=_number(doc["batch_size"], "hyperparameters.batch_size", lo=1, integer=True),
        learning_rate=_number(doc["learning_rate"], "hyperparameters.learning_rate", lo=0.0, lo_open=True),
        momentum=_number(doc.get("momentum", 0.9), "hyperparameters.momentum", lo=0.0, hi=0.999999),
        lr_decay=LrDecay(boundaries, factors),
    )


def parse_schedule(value: Any, field: str = "policy.schedule") -> tuple[Phase, ...]:
    """Validate an ordered list of `{protocol, until}` phases; the last runs to the end (1.0)."""
    if not isinstance(value, (list, tuple)) or not value:
        raise _fail(field, value, "must be a non-empty list of {protocol, until} phases")
    phases: list[Phase] = []
    previous = 0.0
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        item = _mapping(item, where)
        _check_keys(item, ("protocol", "until"), f"{where}.")
        protocol = item.get("protocol")
        if protocol not in PROTOCOLS:
            raise SpecError(f"{where}.protocol={protocol!r}: unknown protocol"
                            f"{did_you_mean(protocol, PROTOCOLS)}; valid: {', '.join(PROTOCOLS)}")
        last = i == len(value) - 1
        if last:
            until = _number(item.get("until", 1.0), f"{where}.until", lo=0.0, hi=1.0)
            if until != 1.0:
                raise _fail(f"{where}.until", until, "the last phase runs to the end: omit it or use 1.0")
        else:
            if "until" not in item:
                raise SpecError(f"{where}.until is required for every phase but the last")
            until = _number(item["until"], f"{where}.until", lo=0.0, hi=1.0)
            if until <= previous:
                raise _fail(f"{where}.until", until, f"must be greater than the previous phase's end {previous}")
            if until >= 1.0:
                raise _fail(f"{where}.until", until, "must be below 1.0 (a later phase follows)")
        if phases and phases[-1].protocol == protocol:
            raise _fail(f"{where}.protocol", protocol, "repeats the previous phase's protocol; merge them")
        phases.append(Phase(protocol, until))
        previous = until
    return tuple(phases)


def switch_at_schedule(fraction: float, field: str = "--switch-at") -> tuple[Phase, ...]:
    """The `[bsp until F, asp]` schedule; F=0 is pure ASP and F=1 pure BSP."""
    f = _number(fraction, field, lo=0.0, hi=1.0)
    if f == 0.0:
        return (Phase("asp", 1.0),)
    if f == 1.0:
        return (Phase("bsp", 1.0),)
    return (Phase("bsp", f), Phase("asp", 1.0))


def _policy(doc: Any) -> PolicySpec:
    from syncswitch.policies import CONFIGURATION_POLICIES

    doc = _mapping(doc, "policy")
    _check_keys(doc, ("schedule", "switch_at", "switch_mode", "configuration"), "policy.")
    if "schedule" in doc and "switch_at" in doc:
        raise SpecError("policy.schedule and policy.switch_at are exclusive: give one")
    if "schedule" in doc:
        schedule, source = parse_schedule(doc["schedule"]), "spec"
    elif "switch_at" in doc:
        schedule, source = switch_at_schedule(doc["switch_at"], "policy.switch_at"), "spec"
    else:
        schedule, source = switch_at_schedule(DEFAULT_SWITCH_AT), "default"
    mode = doc.get("switch_mode", "in-place")
    if mode not in SWITCH_MODES:
        raise SpecError(f"policy.switch_mode={mode!r}: unknown{did_you_mean(mode, SWITCH_MODES)}; "
                        f"valid: {', '.join(SWITCH_MODES)}")
    configuration = doc.get("configuration", "paper")
    CONFIGURATION_POLICIES.get(configuration, field="policy.configuration")
    return PolicySpec(schedule, mode, configuration, source)


def _cluster(doc: Any) -> ClusterSpec:
    from syncswitch.cluster_manager.backends import get_backend

    doc = dict(_mapping(doc, "cluster"))
    backend = doc.pop("backend", "local")
    workers = _number(doc.pop("workers", 2), "cluster.workers", lo=1, hi=1024, integer=True)
    options = get_backend(backend).validate_options(doc)
    return ClusterSpec(backend, workers, options)


def _workload(doc: Any) -> WorkloadSpec:
    doc = _mapping(doc, "workload")
    _check_keys(doc, ("epochs", "samples"), "workload.")
    if ("epochs" in doc) == ("samples" in doc):
        raise SpecError("workload needs exactly one of workload.epochs or workload.samples")
    if "epochs" in doc:
        return WorkloadSpec(epochs=_number(doc["epochs"], "workload.epochs", lo=0.0, lo_open=True))
    return WorkloadSpec(samples=_number(doc["samples"], "workload.samples", lo=1, integer=True))


def _evaluation(doc: Any) -> EvaluationSpec:
    doc = _mapping(doc, "evaluation")
    _check_keys(doc, ("every", "target_accuracy", "batch_size"), "evaluation.")
    target = doc.get("target_accuracy")
    return EvaluationSpec(
        every=_number(doc.get("every", 0.05), "evaluation.every", lo=0.001, hi=1.0),
        target_accuracy=None if target is None else _number(target, "evaluation.target_accuracy", lo=0.0, hi=1.0),
        batch_size=_number(doc.get("batch_size", 500), "evaluation.batch_size", lo=1, integer=True),
    )


def expand_scenario(workers: int, stragglers: int, occurrences: int, delay_ms: float, duration_s: float,
                    seed: int, within: tuple[float, float]) -> tuple[Injection, ...]:
    """Deterministic injections: `occurrences` slowdowns spread over `within`, on `stragglers` workers.

    Worker 0, the chief, stays healthy: it also runs the BSP token queue runner and writes the
    checkpoints, so slowing it would slow every worker instead of making one straggler. `within`
    is cut into one slot per occurrence and each starts in the first half of its slot at random;
    workers take the slots in turn, so a worker's starts are at least half a slot apart.
    """
    rng = random.Random(seed)
    chosen = rng.sample(range(1, workers), stragglers)
    lo, hi = within
    slot = (hi - lo) / occurrences
    return tuple(Injection(chosen[i % stragglers], round(lo + slot * (i + rng.random() / 2), 6),
                           float(duration_s), float(delay_ms))
                 for i in range(occurrences))


def _bsp_share(schedule: tuple[Phase, ...]) -> tuple[float, float]:
    # The span of the first BSP phase: transient stragglers only matter until the BSP share is done.
    start = 0.0
    for phase in schedule:
        if phase.protocol == "bsp":
            return (start, phase.until)
        start = phase.until
    return (0.0, 1.0)


def _scenario(value: Any, workers: int, schedule: tuple[Phase, ...], seed: int) -> tuple[Injection, ...]:
    field = "stragglers.scenario"
    if isinstance(value, str):
        value = {"preset": value}
    doc = _mapping(value, field)
    _check_keys(doc, ("preset", "stragglers", "occurrences", "delay_ms", "duration_s", "seed", "within"),
                f"{field}.")
    preset = doc.get("preset", "mild")
    if preset not in SCENARIO_PRESETS:
        raise SpecError(f"{field}={preset!r}: unknown preset{did_you_mean(preset, SCENARIO_PRESETS)}; "
                        f"valid: {', '.join(SCENARIO_PRESETS)}")
    doc = {**SCENARIO_PRESETS[preset], **doc}
    if workers < 2:
        raise _fail("cluster.workers", workers, f"{field} needs 2 or more workers (worker 0 stays healthy)")
    count = _number(doc["stragglers"], f"{field}.stragglers", lo=1, hi=workers - 1, integer=True)
    occurrences = _number(doc["occurrences"], f"{field}.occurrences", lo=count, integer=True)
    if "within" in doc:
        within = _fraction_list(doc["within"], f"{field}.within")
        if len(within) != 2 or within[0] >= within[1]:
            raise _fail(f"{field}.within", list(within), "must be [start, end] with start < end")
    else:
        within = _bsp_share(schedule)
    return expand_scenario(
        workers, count, occurrences,
        delay_ms=_number(doc["delay_ms"], f"{field}.delay_ms", lo=0.0, lo_open=True),
        duration_s=_number(doc["duration_s"], f"{field}.duration_s", lo=0.0, lo_open=True),
        seed=_number(doc.get("seed", seed), f"{field}.seed", lo=0, integer=True),
        within=(within[0], within[1]),
    )


def _injections(value: Any, workers: int) -> tuple[Injection, ...]:
    if not isinstance(value, (list, tuple)):
        raise _fail("stragglers.inject", value, "must be a list of {worker, at, duration_s, delay_ms}")
    out: list[Injection] = []
    for i, item in enumerate(value):
        where = f"stragglers.inject[{i}]"
        item = _mapping(item, where)
        keys = ("worker", "at", "duration_s", "delay_ms")
        _check_keys(item, keys, f"{where}.")
        for key in keys:
            if key not in item:
                raise SpecError(f"{where}.{key} is required")
        worker = _number(item["worker"], f"{where}.worker", integer=True)
        if not 0 <= worker < workers:
            raise _fail(f"{where}.worker", item["worker"], f"must be in [0, {workers}) (cluster.workers={workers})")
        at = _number(item["at"], f"{where}.at", lo=0.0, hi=1.0)
        if at >= 1.0:
            raise _fail(f"{where}.at", item["at"], "must be < 1.0 (a fraction of the workload)")
        if any(o.worker == worker and o.at == at for o in out):
            raise _fail(f"{where}.at", item["at"], f"worker {worker} already has a slowdown starting there")
        out.append(Injection(worker, at,
                             _number(item["duration_s"], f"{where}.duration_s", lo=0.0, lo_open=True),
                             _number(item["delay_ms"], f"{where}.delay_ms", lo=0.0, lo_open=True)))
    return tuple(sorted(out, key=lambda inj: (inj.at, inj.worker)))


def _stragglers(doc: Any, workers: int, schedule: tuple[Phase, ...], seed: int) -> StragglerSpec:
    from syncswitch.policies import STRAGGLER_POLICIES

    doc = _mapping(doc, "stragglers")
    _check_keys(doc, ("policy", "detection", "method", "inject", "scenario"), "stragglers.")
    policy = doc.get("policy", "none")
    STRAGGLER_POLICIES.get(policy, field="stragglers.policy")
    if policy != "none" and workers < profiler.MIN_WORKERS:
        raise _fail("stragglers.policy", policy, f"needs cluster.workers >= {profiler.MIN_WORKERS} (got {workers}): "
                    "mean - std cannot single out a straggler among fewer workers")
    detection = _mapping(doc.get("detection"), "stragglers.detection")
    _check_keys(detection, ("window_s", "consecutive", "min_gap"), "stragglers.detection.")
    method = doc.get("method", "delay")
    if method not in SLOWDOWN_METHODS:
        raise SpecError(f"stragglers.method={method!r}: unknown{did_you_mean(method, SLOWDOWN_METHODS)}; "
                        f"valid: {', '.join(SLOWDOWN_METHODS)}")
    if "inject" in doc and "scenario" in doc:
        raise SpecError("stragglers.inject and stragglers.scenario are exclusive: give one")
    if "inject" in doc:
        injections = _injections(doc["inject"], workers)
    elif "scenario" in doc:
        injections = _scenario(doc["scenario"], workers, schedule, seed)
    else:
        injections = ()
    return StragglerSpec(
        policy=policy,
        # Metrics arrive every 0.5 s: a shorter window would often be empty.
        window_s=_number(detection.get("window_s", profiler.DEFAULT_WINDOW_S), "stragglers.detection.window_s",
                         lo=0.5),
        consecutive=_number(detection.get("consecutive", profiler.DEFAULT_CONSECUTIVE),
                            "stragglers.detection.consecutive", lo=1, integer=True),
        method=method,
        injections=injections,
        min_gap=_number(detection.get("min_gap", profiler.DEFAULT_MIN_GAP), "stragglers.detection.min_gap",
                        lo=0.0, hi=0.99),
    )


TOP_KEYS = ("name", "script", "params", "hyperparameters", "workload", "cluster", "policy",
            "evaluation", "seed", "stragglers")


def validate(doc: Any, path: str) -> JobSpec:
    """Validate a parsed spec document; `path` anchors the relative script path."""
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: a job spec must be a YAML mapping, got {type(doc).__name__}")
    _check_keys(doc, TOP_KEYS, "")
    name = doc.get("name") or os.path.splitext(os.path.basename(path))[0]
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise _fail("name", name, "use letters, digits, '-', '_' or '.'")
    script = doc.get("script")
    if not isinstance(script, str) or not script:
        raise SpecError(f"script is required: the path of the training script (relative to {path})")
    script_path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), script))
    if not os.path.isfile(script_path):
        raise _fail("script", script, f"no such file {script_path}")
    params = _mapping(doc.get("params"), "params")
    hyperparameters = _hyperparameters(doc.get("hyperparameters"))
    workload = _workload(doc.get("workload"))
    cluster = _cluster(doc.get("cluster"))
    policy = _policy(doc.get("policy"))
    evaluation = _evaluation(doc.get("evaluation"))
    seed = _number(doc.get("seed", 0), "seed", lo=0, integer=True)
    return JobSpec(
        name=name,
        script=script_path,
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
        stragglers=_stragglers(doc.get("stragglers"), cluster.workers, policy.schedule, seed),
    )


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
        node.pop(replaced, None)


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
