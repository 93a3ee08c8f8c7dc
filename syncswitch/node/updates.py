"""Update ops a user's model_fn made but left out of UPDATE_OPS (Keras' BatchNormalization), found so they run.

A tf.compat.v1 training step runs what the loss depends on and the UPDATE_OPS collection. Keras layers called
outside a Keras model in a v1 graph keep their update ops on the layer (`layer.updates`), in no collection, so
a plain script's BatchNormalization would train with its moving mean and variance never moving; its
evaluation (training=False) would then normalise with the initial 0 and 1. The graph itself tells these ops
apart: assignments to non-trainable variables, created by model_fn, that neither the loss, the logits nor the
collected updates run, and that are not a variable's initializer.
"""

from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1

ASSIGN_TYPES = frozenset({"AssignSubVariableOp", "AssignAddVariableOp", "AssignVariableOp",
                          "AssignSub", "AssignAdd", "Assign"})


def _ancestors(roots) -> set:
    """Every op that running `roots` runs (data and control inputs, transitively)."""
    # A tensor, an op, or what a resource variable's assign returns (its `.op` is the assignment).
    seen, stack = set(), [getattr(r, "op", r) for r in roots]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def orphan_updates(graph: tf.Graph, made, runs) -> list:
    """The ops among `made` (those model_fn created) that update a non-trainable variable and that running
    `runs` (the loss, the logits, the collected update ops) would not run."""
    trainable = {v.op for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)}
    variables = graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES) + graph.get_collection(v1.GraphKeys.LOCAL_VARIABLES)
    initializers = {v.initializer for v in variables}
    non_trainable = {v.op for v in variables} - trainable
    candidates = [op for op in made if op.type in ASSIGN_TYPES and op not in initializers
                  and op.inputs and op.inputs[0].op in non_trainable]
    if not candidates:
        return []
    run = _ancestors(runs)
    return [op for op in candidates if op not in run]
