"""A worker-local replica of the user's model, for protocols whose workers step on their own copy (local SGD).

The shared model lives on the parameter servers, where every other protocol reads and updates it. A local
protocol needs the same model reading variables on the worker, so model_fn is called a second time, on the
same input batch, under a variable scope of its own and pinned to the worker's device. The replica's
variables are matched to the shared ones by creation order (a model_fn builds its layers in a fixed order);
they are moved out of the global collections, so checkpoints, the chief's initialization and the readiness
checks never see them, and every worker initializes its own in its local init.
"""

from __future__ import annotations

import dataclasses
import sys

import tensorflow as tf

from syncswitch.node import script as scriptmod
from syncswitch.node.updates import orphan_updates
from syncswitch.protocols.engines.base import localize

v1 = tf.compat.v1
SCOPE = "syncswitch_replica"


@dataclasses.dataclass
class Replica:
    """The worker's copy of the model: its loss (with its own update ops run first), and each shared variable
    paired with its copy, trainable pairs first in the shared model's order."""

    loss: tf.Tensor
    pairs: list               # [(shared variable, local copy)] for every variable model_fn made
    trainable: list           # the local copies that are trained (their shared twins are trainable)
    device: str               # the worker's device, where the copies live


def _made_variables(graph, before: set) -> list:
    return [v for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES) if v.ref() not in before]


def build(graph, module, path: str, features, labels, params: dict, shared: list, device: str) -> Replica:
    """Call model_fn again on `features` and `labels`, its variables on `device`; `shared`: the variables the
    first call made, in creation order."""
    before = {v.ref() for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)}
    ops_before = set(graph.get_operations())
    updates_before = set(graph.get_collection(v1.GraphKeys.UPDATE_OPS))
    trainable_before = {v.ref() for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)}
    with v1.device(device), v1.variable_scope(SCOPE):
        out = scriptmod.call_model_fn(module, path, features, labels, params, True)
    made = _made_variables(graph, before)
    if len(made) != len(shared) or any(
            m.shape != s.shape or m.dtype.base_dtype != s.dtype.base_dtype for m, s in zip(made, shared)):
        raise scriptmod.ScriptError(
            f"script {path}: model_fn made different variables when called a second time ({len(made)} against "
            f"{len(shared)} the first time); a local protocol (local-sgd) needs model_fn to build the same model "
            "on every call")
    trainable_now = {v.ref() for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)} - trainable_before
    trained = [m for m in made if m.ref() in trainable_now]
    collected = [op for op in graph.get_collection(v1.GraphKeys.UPDATE_OPS) if op not in updates_before]
    new_ops = [op for op in graph.get_operations() if op not in ops_before]
    extra = orphan_updates(graph, new_ops, [out["loss"], out["logits"], *collected])
    if extra:
        print(f"syncswitch: the local replica runs {len(extra)} update op(s) outside UPDATE_OPS", file=sys.stderr,
              flush=True)
    with tf.control_dependencies(collected + extra):
        loss = tf.identity(out["loss"], name="replica_loss")
    # UPDATE_OPS is what the shared model's training step runs: the replica's own stay out of it.
    graph.get_collection_ref(v1.GraphKeys.UPDATE_OPS)[:] = [
        op for op in graph.get_collection(v1.GraphKeys.UPDATE_OPS) if op in updates_before]
    localize(graph, made)
    return Replica(loss, list(zip(shared, made)), trained, device)
