"""Policy store for recurring jobs: found switch points persisted under $SYNCSWITCH_HOME, keyed by job signature."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterator, MutableMapping

from syncswitch.errors import SyncSwitchError
from syncswitch.files import write_json_atomic

STORE_VERSION = 1


class StoreError(SyncSwitchError):
    """The policy store or pilot cache is unreadable, corrupt, or has no such entry."""

    exit_code = 1


def syncswitch_home() -> Path:
    """$SYNCSWITCH_HOME, or ~/.syncswitch."""
    return Path(os.environ.get("SYNCSWITCH_HOME") or Path.home() / ".syncswitch").expanduser()


def _plain(value: Any) -> Any:
    """JSON-ready copy: dataclasses to dicts, tuples to lists, keys to strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        # 0.1 vs 0.10 or 32 vs 32.0 in a spec must not produce a different signature
        return int(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def canonical_json(value: Any) -> str:
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def file_sha256(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        raise StoreError(f"script {path}: cannot read it to sign the job ({exc.strerror})") from None


# Hyperparameters (dotted paths) added after stored policies existed, with the default that changes nothing.
SIGNATURE_DEFAULTS = {"clip_norm": None, "compression": None, "lr_decay.warmup": 0.0, "lr_decay.cosine": None}


def signature_inputs(script_path: str, params: dict, hyperparameters: Any, workers: int, backend: str) -> dict:
    """What a job signature covers; stored with each policy so `policy show` can say what it applies to."""
    return {
        "script": os.path.abspath(script_path),
        "script_sha256": file_sha256(script_path),
        "params": _plain(params or {}),
        "hyperparameters": _plain(hyperparameters or {}),
        "workers": int(workers),
        "backend": str(backend),
    }


def job_signature(script_path: str, params: dict, hyperparameters: Any, workers: int, backend: str) -> str:
    """sha256 over the script's content hash and the canonical JSON of the other inputs.

    The script path itself is left out so a moved checkout keeps its policies; its content is in.
    """
    inputs = signature_inputs(script_path, params, hyperparameters, workers, backend)
    inputs.pop("script")
    return hashlib.sha256(canonical_json(inputs).encode()).hexdigest()


def signature_for_spec(job_spec) -> tuple[str, dict]:
    """(signature, inputs) of a validated JobSpec.

    The workload length joins the hyperparameters: the switch point is a fraction of the workload,
    so the same job trained for longer is a different job to the search.
    """
    hyper = dict(_plain(job_spec.hyperparameters))
    # A field added later with a default that changes nothing is left out where it holds that default: the jobs
    # stored before it keep their signatures (and their policies).
    for path, default in SIGNATURE_DEFAULTS.items():
        *parents, name = path.split(".")
        holder = hyper
        for parent in parents:
            holder = holder.get(parent) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and holder.get(name, default) == default:
            holder.pop(name, None)
    hyper["workload"] = _plain(job_spec.workload)
    args = (job_spec.script, job_spec.params, hyper, job_spec.cluster.workers, job_spec.cluster.backend)
    return job_signature(*args), signature_inputs(*args)


@dataclasses.dataclass
class PolicyRecord:
    """A stored timing policy: switch at `switch_at` of the workload, found by a search."""

    signature: str
    job_name: str
    switch_at: float
    target_accuracy: float
    achieved_mean: float | None
    achieved_std: float | None
    threshold: float
    search_cost_s: float
    search_cost_bsp: float | None
    runs: int
    created: str
    inputs: dict = dataclasses.field(default_factory=dict)
    settings: dict = dataclasses.field(default_factory=dict)  # M, R, K the search ran with
    # The BSP reference pilots' run folders: the accuracy guard's reference for the job's later runs
    reference_runs: list = dataclasses.field(default_factory=list)
    # The switch rule (name and thresholds) the pilots were timed by: a recurring job adopts it with the switch point
    switch_rule: dict = dataclasses.field(default_factory=dict)
    # The switch target's throughput as a share of BSP's, measured by the pilots' trials ({target, ratio, runs,
    # rule}), and their switches' median pause out of BSP ({pause_s, pauses}); empty where none measured either: a
    # recurring job's speed rule decides from the ratio without a trial, and weighs a switch by the pause
    speed: dict = dataclasses.field(default_factory=dict)
    # The switch target's parameters the search chose beyond the spec's ({"period": 4}: the longest local-SGD period
    # its pilots kept the accuracy with, search/period_search.py); empty where it tried none or kept the spec's
    target_params: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, doc: dict, where: str) -> "PolicyRecord":
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [n for n in ("signature", "job_name", "switch_at", "target_accuracy") if n not in doc]
        if missing:
            raise StoreError(f"{where}: policy record lacks {missing[0]!r}")
        defaults = {"achieved_mean": None, "achieved_std": None, "threshold": 0.01, "search_cost_s": 0.0,
                    "search_cost_bsp": None, "runs": 0, "created": ""}
        data = {**defaults, **{k: v for k, v in doc.items() if k in names}}
        sa = data["switch_at"]
        if isinstance(sa, bool) or not isinstance(sa, (int, float)) or not 0 <= sa <= 1:
            raise StoreError(f"{where}: switch_at={sa!r} must be a number in [0, 1]")
        return cls(**data)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def atomic_write_json(path: Path, doc: Any) -> None:
    write_json_atomic(path, doc, sort_keys=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise read-modify-write between processes (two searches finishing together)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX: last writer wins, writes stay atomic
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_json_doc(path: Path, what: str, key: str) -> dict:
    """{} for a missing file; a clear error (and no overwrite) for anything unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StoreError(f"{what} {path}: cannot read it ({exc.strerror})") from None
    hint = "fix or move the file away; syncswitch will not overwrite it"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", "?")
        raise StoreError(f"{what} {path} is corrupt (invalid JSON at line {line}); {hint}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key, {}), dict):
        raise StoreError(f"{what} {path} is corrupt (expected an object with a {key!r} mapping); {hint}")
    version = doc.get("version", STORE_VERSION)
    if version != STORE_VERSION:
        raise StoreError(f"{what} {path} has version {version!r}; this syncswitch reads version {STORE_VERSION}")
    return doc


class PolicyStore:
    """JSON file of PolicyRecords keyed by job signature (default $SYNCSWITCH_HOME/policies.json)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else syncswitch_home() / "policies.json"

    def _load(self) -> dict[str, dict]:
        return dict(read_json_doc(self.path, "policy store", "policies").get("policies", {}))

    def _save(self, policies: dict[str, dict]) -> None:
        atomic_write_json(self.path, {"version": STORE_VERSION, "policies": policies})

    def list(self) -> list[PolicyRecord]:
        recs = [PolicyRecord.from_dict(v, f"{self.path} [{k[:12]}]") for k, v in self._load().items()]
        return sorted(recs, key=lambda r: (r.job_name, r.created))

    def get(self, signature: str) -> PolicyRecord | None:
        doc = self._load().get(signature)
        return None if doc is None else PolicyRecord.from_dict(doc, f"{self.path} [{signature[:12]}]")

    def put(self, record: PolicyRecord) -> None:
        with _locked(self.path):
            policies = self._load()  # raises on a corrupt file, so it is never replaced silently
            policies[record.signature] = _plain(record)
            self._save(policies)

    def resolve(self, key: str) -> PolicyRecord:
        """A record by full signature, unique signature prefix, or unique job name."""
        key = (key or "").strip()
        records = self.list()
        exact = [r for r in records if r.signature == key]
        hits = exact or [r for r in records if r.signature.startswith(key) and len(key) >= 4] \
            or [r for r in records if r.job_name == key]
        if not hits:
            raise StoreError(f"no stored policy matches {key!r} (see `syncswitch policy list`)")
        if len(hits) > 1:
            names = ", ".join(f"{r.job_name}:{r.signature[:12]}" for r in hits)
            raise StoreError(f"{key!r} matches {len(hits)} policies ({names}); give more of the signature")
        return hits[0]

    def delete(self, key: str) -> PolicyRecord:
        with _locked(self.path):
            record = self.resolve(key)
            policies = self._load()
            policies.pop(record.signature, None)
            self._save(policies)
        return record


def stored_policy(job_spec, store: PolicyStore | None = None) -> PolicyRecord | None:
    """The stored policy for this exact job (None when absent or the job changed since)."""
    signature, _ = signature_for_spec(job_spec)
    record = (store or PolicyStore()).get(signature)
    if record is None:
        return None
    searched = record.settings.get("switching")
    if searched and searched.get("configuration") != job_spec.policy.configuration:
        return None  # found under another configuration policy: it does not carry over
    return record


def stored_switch_at(job_spec, store: PolicyStore | None = None) -> float | None:
    """The stored switch point for this exact job (None when absent or the job changed since)."""
    record = stored_policy(job_spec, store)
    return None if record is None else float(record.switch_at)


class JsonPilotCache(MutableMapping):
    """Pilot results of one job persisted as JSON, so an interrupted or repeated search reuses them."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        pilots = dict(read_json_doc(self.path, "pilot cache", "pilots").get("pilots", {}))
        # Real pilots ran every repeat on the job's own seed until each repeat got its own (seed + repeat, as the
        # simulated pilots and `experiment` do): such a repeat r >= 1 measured the same draw again, so it is run
        # anew. Repeat 0 ran on the job's seed then as now.
        self._data: dict[str, dict] = {k: doc for k, doc in pilots.items()
                                       if doc.get("seeded") or k.partition("/")[2] == "0"}

    @staticmethod
    def _key(key: tuple[float, int]) -> str:
        switch_at, repeat = key
        return f"{round(float(switch_at), 9)!r}/{int(repeat)}"

    def __getitem__(self, key):
        from syncswitch.search.binary_search import PilotResult
        from syncswitch.search.pilot_runs import learned

        doc = self._data[self._key(key)]
        acc = doc.get("converged_accuracy")
        # A pilot cached before the cache kept `learned` is judged from its folder, where that is still there.
        trained = doc["learned"] if "learned" in doc else learned(doc.get("run_dir"))
        return PilotResult(None if acc is None or (isinstance(acc, float) and math.isnan(acc)) else float(acc),
                           float(doc.get("total_time_s", 0.0)), doc.get("run_dir"), bool(doc.get("rolled_back")),
                           bool(doc.get("slower")), trained, doc.get("switched"))

    def __setitem__(self, key, result) -> None:
        acc = result.converged_accuracy
        self._data[self._key(key)] = {
            "converged_accuracy": acc if acc is not None and math.isfinite(acc) else None,
            "total_time_s": float(result.total_time_s),
            "run_dir": result.run_dir,
            "rolled_back": bool(result.rolled_back),
            "slower": bool(result.slower),
            "learned": result.learned,
            "switched": result.switched,
            "seeded": True,  # repeat r ran on seed + r (see __init__)
        }
        with _locked(self.path):
            atomic_write_json(self.path, {"version": STORE_VERSION, "pilots": self._data})

    def __delitem__(self, key) -> None:
        del self._data[self._key(key)]
        with _locked(self.path):
            atomic_write_json(self.path, {"version": STORE_VERSION, "pilots": self._data})

    def __iter__(self):
        for k in self._data:
            s, _, r = k.partition("/")
            yield (float(s), int(r))

    def __len__(self) -> int:
        return len(self._data)


def switching_for_spec(job_spec) -> dict:
    """How a job's switches are made: what a searched switch point is only valid under."""
    from syncswitch.spec import switch_target

    policy = job_spec.policy
    out = {"configuration": policy.configuration, "switch_mode": policy.switch_mode,
           "guard": policy.guard.enabled, "fallback": list(policy.fallback)}
    target = switch_target(policy)
    if target.protocol != "asp" or target.hyperparameters:
        # ASP, the paper's target and the only one before there was a choice, stays unnamed: pilots and
        # policies stored for it still match.
        out["target"] = {"protocol": target.protocol, **target.param_dict, **dict(target.hyperparameters)}
    rule = switch_rule_for_spec(job_spec)
    if rule["rule"] != "fixed":
        # A switch point where the schedule says, the only way before there were rules, stays unnamed: pilots and
        # policies stored for it still match; a point that is the earliest for a rule is another setting.
        out["switch_rule"] = rule
    speed = switch_speed_for_spec(job_spec)
    if speed["rule"] != "off":
        # Pilots whose speeds were not judged, the only way before there were speed rules, stay unnamed.
        out["switch_speed"] = speed
    return out


def switch_speed_for_spec(job_spec) -> dict:
    """The speed rule a job's switches are judged by, thresholds resolved to the rule's defaults."""
    from syncswitch.policies.speed import SpeedSettings

    speed = job_spec.policy.switch_speed
    return {"rule": speed.rule, **dataclasses.asdict(SpeedSettings.from_spec(speed))}


def switch_rule_for_spec(job_spec) -> dict:
    """The switch rule a job's switches out of BSP are timed by, thresholds resolved to the rule's defaults."""
    from syncswitch.policies.timing import TimingSettings

    rule = job_spec.policy.switch_rule
    if rule.rule == "fixed":
        return {"rule": "fixed"}
    return {"rule": rule.rule, **dataclasses.asdict(TimingSettings.from_spec(rule))}


def pilot_cache_for(signature: str, switching: dict | None = None) -> JsonPilotCache:
    """The pilots of one job under one way of switching (pilots under another configuration policy or
    fallback ladder say nothing about this one)."""
    suffix = f"-{hashlib.sha256(canonical_json(switching).encode()).hexdigest()[:12]}" if switching else ""
    return JsonPilotCache(syncswitch_home() / "pilots" / f"{signature}{suffix}.json")
