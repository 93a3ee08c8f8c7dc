"""A worker-local replica of the user's model, for protocols whose workers step on their own copy (local SGD).

The shared model lives on the parameter servers, where every other protocol reads and updates it. A local
protocol needs the same model reading variables on the worker. The replica is a copy of the ops model_fn built
(those its loss and update ops run), imported once more into the graph with each shared variable's handle
replaced by a worker-local copy's and everything else it read (the input batch, lookup tables) kept. Copying
the graph, not calling model_fn again, holds for any script: one that caches its model per graph or builds it
once at module level makes no new variables when called twice. The copies leave the global collections, so
checkpoints, the chief's initialization and the readiness checks never see them; each worker initializes its own.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from syncswitch.node import script as scriptmod
from syncswitch.node.updates import ancestors
from syncswitch.protocols.engines.base import localize

v1 = tf.compat.v1
SCOPE = "syncswitch_replica"
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})


@dataclasses.dataclass
class Replica:
    """The worker's copy of the model: its loss (its own update ops run first), and each shared variable
    paired with its copy."""

    loss: tf.Tensor
    pairs: list               # [(shared variable, local copy)] for every variable the model's ops use
    trainable: list           # the copies that are trained (their shared twins are trainable)
    device: str               # the worker's device, where the copies live


def _copy_variable(shared, device: str, index: int):
    with tf.device(device):
        return tf.Variable(tf.zeros(shared.shape, shared.dtype.base_dtype), trainable=False,
                           name=f"{SCOPE}_variables/{index}", collections=[v1.GraphKeys.LOCAL_VARIABLES])


def build(graph, model_ops, loss, updates, device: str, path: str = "") -> Replica:
    """Copy the ops among `model_ops` (those model_fn made) that `loss` and `updates` run onto `device`, reading
    worker-local copies of the variables; the copy of `loss`, with the copies of `updates` run before it."""
    made = set(model_ops)
    needed = [op for op in ancestors([loss, *updates]) if op in made and op.type not in VARIABLE_OPS]
    by_handle = {v.handle.op if hasattr(v, "handle") else v.op: v
                 for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)
                 + graph.get_collection(v1.GraphKeys.LOCAL_VARIABLES)}
    trainable = {v.ref() for v in graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)}
    # A model that reads the global step (a schedule of its own) reads the shared one: a copy would stand still
    # through the phase, and writing it back at publish would undo the steps the group counted there.
    counters = {v.ref() for v in graph.get_collection(v1.GraphKeys.GLOBAL_STEP)}
    keep = set(needed)
    shared, input_map = [], {}
    for op in needed:
        for t in op.inputs:
            if t.op in keep or t.name in input_map:
                continue
            variable = by_handle.get(t.op)
            if variable is not None and variable.ref() not in counters:
                if variable.dtype._is_ref_dtype:  # a reference variable's read cannot be remapped
                    raise scriptmod.ScriptError(
                        f"script {path}: local-sgd needs resource variables; {variable.op.name} is a reference "
                        "variable (tf.compat.v1.get_variable(..., use_resource=False))")
                shared.append(variable)
            input_map[t.name] = t
        for c in op.control_inputs:
            if c not in keep:
                input_map["^" + c.name] = c
    copies = [_copy_variable(s, device, k) for k, s in enumerate(shared)]
    for s, c in zip(shared, copies):
        input_map[s.handle.name] = c.handle
    # Only the copied ops, not the whole graph serialized and filtered. The functions they call (tf.cond and while
    # bodies) are in the graph already, some since rewritten for their gradients: the subset carries no library.
    subset = v1.GraphDef(versions=graph.graph_def_versions)
    for op in needed:
        node = subset.node.add()
        node.CopyFrom(op.node_def)
        node.device = ""
        node.attr.pop("_class", None)  # colocation with the shared variables' ops: the copy lives on the worker
    names = [loss.name, *[u.name for u in updates]]
    with tf.device(device):
        imported = tf.graph_util.import_graph_def(subset, input_map=input_map, return_elements=names, name=SCOPE)
    new_loss, new_updates = imported[0], imported[1:]
    _keep_gradient_functions(graph, needed)
    with tf.control_dependencies(new_updates):
        replica_loss = tf.identity(new_loss, name="replica_loss")
    localize(graph, copies)
    return Replica(replica_loss, list(zip(shared, copies)),
                   [c for s, c in zip(shared, copies) if s.ref() in trainable], device)


def _keep_gradient_functions(graph, originals) -> None:
    """Give each copied call of a tf.function its original's gradient. Calling a tf.function in a graph sets the
    call op's gradient on the Python object (`_gradient_function`), which no GraphDef carries: the imported copy
    had none, and differentiating the replica failed inside TensorFlow ("'AtomicFunction' object has no attribute
    'python_grad_func'") for any model_fn that calls one. The gradient rewrites the op it is given (its forward
    function, its outputs), so the copy's is its own."""
    for op in originals:
        gradient = getattr(op, "_gradient_function", None)
        if gradient is not None:
            graph.get_operation_by_name(f"{SCOPE}/{op.name}")._gradient_function = gradient
