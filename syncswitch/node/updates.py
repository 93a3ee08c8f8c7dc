"""Update ops a user's model_fn made but left out of UPDATE_OPS (Keras' BatchNormalization), found so they run.

A tf.compat.v1 training step runs what the loss depends on and the UPDATE_OPS collection. Keras layers called
outside a Keras model in a v1 graph keep their update ops on the layer (`layer.updates`), in no collection, so
a plain script's BatchNormalization would train with its moving mean and variance never moving; its
evaluation (training=False) would then normalise with the initial 0 and 1. The graph itself tells these ops
apart: assignments to non-trainable variables, created by model_fn, that neither the loss, the logits nor the
collected updates run, and that are not a variable's initializer. Those that need a feed are left out: a Keras
model given `input_shape` also builds its layers on a placeholder of its own, whose update ops no step can run.
"""

from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1

ASSIGN_TYPES = frozenset({"AssignSubVariableOp", "AssignAddVariableOp", "AssignVariableOp",
                          "AssignSub", "AssignAdd", "Assign"})


def ancestors(roots) -> set:
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


def _fed(ops) -> set:
    """Those of `ops` that depend, through data or control inputs, on a placeholder without a default."""
    memo: dict = {}
    visiting: set = set()  # v1 while loops make cycles (NextIteration -> Merge): an op on the path counts as not fed
    for root in ops:
        stack = [(root, False)]
        while stack:  # iterative post-order: graphs are deeper than Python's recursion limit
            op, expanded = stack.pop()
            deps = [t.op for t in op.inputs] + list(op.control_inputs)
            if expanded:
                visiting.discard(op)
                memo[op] = op.type == "Placeholder" or any(memo.get(d, False) for d in deps)
            elif op not in memo and op not in visiting:
                visiting.add(op)
                stack.append((op, True))
                stack.extend((d, False) for d in deps if d not in memo and d not in visiting)
    return {op for op in ops if memo[op]}


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
    run = ancestors(runs)
    orphans = [op for op in candidates if op not in run]
    fed = _fed(orphans)
    return [op for op in orphans if op not in fed]
