"""The plain spec sections: hyperparameters, cluster, workload and evaluation."""

from __future__ import annotations

from typing import Any

from syncswitch.errors import SpecError
from syncswitch.registry import BACKENDS
from syncswitch.spec.fields import check_keys, choice, fail, fraction_list, mapping, number
from syncswitch.spec.model import (COMPRESSIONS, EVALUATION_LIVE, PER_NODE, ClusterSpec, EvaluationSpec,
                                   Hyperparameters, LrDecay, WorkloadSpec)


def hyperparameters_section(doc: Any) -> Hyperparameters:
    doc = mapping(doc, "hyperparameters")
    check_keys(doc, ("batch_size", "learning_rate", "momentum", "lr_decay", "clip_norm", "compression"),
               "hyperparameters.")
    for key in ("batch_size", "learning_rate"):
        if key not in doc:
            raise SpecError(f"hyperparameters.{key} is required")
    decay = mapping(doc.get("lr_decay"), "hyperparameters.lr_decay")
    check_keys(decay, ("boundaries", "factors", "warmup", "cosine"), "hyperparameters.lr_decay.")
    boundaries = fraction_list(decay.get("boundaries", []), "hyperparameters.lr_decay.boundaries")
    factors = tuple(number(v, f"hyperparameters.lr_decay.factors[{i}]", lo=0.0, lo_open=True)
                    for i, v in enumerate(decay.get("factors", []) or []))
    if len(boundaries) != len(factors):
        raise fail("hyperparameters.lr_decay.factors", list(factors),
                    f"needs one factor per boundary ({len(boundaries)})")
    if list(boundaries) != sorted(set(boundaries)):
        raise fail("hyperparameters.lr_decay.boundaries", list(boundaries), "must be strictly increasing")
    warmup = number(decay.get("warmup", 0.0), "hyperparameters.lr_decay.warmup", lo=0.0, hi=0.5)
    cosine = decay.get("cosine")
    if cosine is not None:
        cosine = number(cosine, "hyperparameters.lr_decay.cosine", lo=0.0, hi=1.0)
        if boundaries:
            raise fail("hyperparameters.lr_decay.cosine", cosine, "is a decay of its own: give it or boundaries, "
                                                                  "not both")
    return Hyperparameters(
        batch_size=number(doc["batch_size"], "hyperparameters.batch_size", lo=1, integer=True),
        learning_rate=number(doc["learning_rate"], "hyperparameters.learning_rate", lo=0.0, lo_open=True),
        momentum=number(doc.get("momentum", 0.9), "hyperparameters.momentum", lo=0.0, hi=0.999999),
        lr_decay=LrDecay(boundaries, factors, warmup, cosine),
        clip_norm=None if doc.get("clip_norm") is None else number(doc["clip_norm"], "hyperparameters.clip_norm",
                                                                   lo=0.0, lo_open=True),
        compression=compression(doc.get("compression")),
    )


def compression(value: Any) -> str | None:
    """`hyperparameters.compression`: the all-reduce's wire type; `none` (or absent) keeps float32."""
    if value is None or value == "none":
        return None
    return choice(value, "hyperparameters.compression", COMPRESSIONS, "wire type")


def cluster_section(doc: Any) -> ClusterSpec:
    doc = dict(mapping(doc, "cluster"))
    backend = doc.pop("backend", "local")
    workers = number(doc.pop("workers", 2), "cluster.workers", lo=1, hi=1024, integer=True)
    backend_cls = BACKENDS.get(backend, field="cluster.backend")
    ps = parameter_servers(doc.pop("parameter_servers", backend_cls.default_parameter_servers), workers)
    options = backend_cls.validate_options(doc)
    return ClusterSpec(backend, workers, options, parameter_servers=ps)


def parameter_servers(value: Any, workers: int) -> int:
    """`cluster.parameter_servers`: `per-node` (0 here) or how many PS tasks, on the first nodes."""
    if value == PER_NODE:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= workers:
        raise fail("cluster.parameter_servers", value,
                   f"must be {PER_NODE!r} or a whole number of PS tasks from 1 to cluster.workers ({workers})")
    return 0 if value == workers else value


def workload_section(doc: Any) -> WorkloadSpec:
    doc = mapping(doc, "workload")
    check_keys(doc, ("epochs", "samples"), "workload.")
    if ("epochs" in doc) == ("samples" in doc):
        raise SpecError("workload needs exactly one of workload.epochs or workload.samples")
    if "epochs" in doc:
        return WorkloadSpec(epochs=number(doc["epochs"], "workload.epochs", lo=0.0, lo_open=True))
    return WorkloadSpec(samples=number(doc["samples"], "workload.samples", lo=1, integer=True))


def evaluation_section(doc: Any) -> EvaluationSpec:
    doc = mapping(doc, "evaluation")
    check_keys(doc, ("every", "target_accuracy", "batch_size", "live"), "evaluation.")
    target = doc.get("target_accuracy")
    return EvaluationSpec(
        every=number(doc.get("every", 0.05), "evaluation.every", lo=0.001, hi=1.0),
        target_accuracy=None if target is None else number(target, "evaluation.target_accuracy", lo=0.0, hi=1.0),
        batch_size=number(doc.get("batch_size", 500), "evaluation.batch_size", lo=1, integer=True),
        live=choice(doc.get("live", "auto"), "evaluation.live", EVALUATION_LIVE),
    )
