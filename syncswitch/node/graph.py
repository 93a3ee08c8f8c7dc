"""Build one node's training graph: its PS and worker servers, the user's model, and every protocol's update op."""

from __future__ import annotations

import collections.abc
import dataclasses
import sys

import tensorflow as tf

from syncswitch.node import batch_check
from syncswitch.node import replica as replicamod
from syncswitch.node import script as scriptmod
from syncswitch.node.schedule import Settings, build_settings
from syncswitch.node.updates import ancestors, orphan_updates
from syncswitch.protocols.engines import ENGINE_STATE, ProtocolEngine, build_engines, needs_replica
from syncswitch.protocols.engines.synchronous import wants_ps
from syncswitch.wire import codec

v1 = tf.compat.v1


class Gradients(collections.abc.Sequence):
    """The shared model's (gradient, variable) pairs, made at their first use. Only the parameter-server protocols
    use them; a run whose protocols all step on replicas (BSP by all-reduce, local SGD) differentiates the replica
    alone, and the backward graph built here as well cost a node about 15% of its graph stage (the synthetic ResNet:
    a second of every node's start-up, 4 nodes on 2 cores)."""

    def __init__(self, optimizer, loss, path: str):
        self._make = lambda: [(g, v) for g, v in optimizer.compute_gradients(loss) if g is not None]
        self._pairs = None
        self._path = path

    def _all(self) -> list:
        if self._pairs is None:
            self._pairs = self._make()
            if not self._pairs:  # its variables read through no differentiable path (the cheap check passed)
                raise scriptmod.ScriptError(f"script {self._path}: model_fn's loss has no gradient for any "
                                            "trainable variable")
        return self._pairs

    def __getitem__(self, index):
        return self._all()[index]

    def __len__(self) -> int:
        return len(self._all())


@dataclasses.dataclass(kw_only=True)
class Model:
    """The user's model on the shared variables: its loss, gradients, the input iterator, and what model_fn made."""

    loss: tf.Tensor
    grads: Gradients
    iterator: object
    made: list                  # the ops model_fn made
    own_updates: list           # the model's own update ops (batch-norm statistics)
    raw_loss: tf.Tensor         # model_fn's loss, before its update ops are attached
    input_feeds: dict           # what the iterator's initializer is fed (node/array_feeds.py)


@dataclasses.dataclass(kw_only=True)
class TrainGraph:
    """Handles the task loop and hooks need."""

    graph: tf.Graph
    engines: dict[str, ProtocolEngine]
    loss: tf.Tensor
    losses: LiveLosses        # protocol -> the loss its steps compute, where not `loss` (a local replica's)
    samples: tf.Variable
    global_step: tf.Variable
    settings: Settings
    total_samples: int
    saver: v1.train.Saver
    scaffold: v1.train.Scaffold
    input_start: tf.Operation  # puts this worker's input stream back at its first batch
    input_feeds: dict          # fed with input_start: the input_fn's large arrays (node/array_feeds.py)


class LiveLosses:
    """protocol -> the loss its engine's steps compute, read when asked: an engine with several paths (BSP's
    all-reduce and parameter-server ones) has the loss of the path its phase entered."""

    def __init__(self, engines: dict):
        self._engines = engines

    def get(self, protocol, default=None):
        engine = self._engines.get(protocol)
        loss = engine.loss if engine is not None else None
        return default if loss is None else loss

    def __bool__(self) -> bool:
        return True


class GreedyByteStrategy:
    """Place each variable on the parameter server holding the fewest bytes so far.

    Round-robin (TF's default) can put every large kernel on one PS; contrib's greedy strategy
    is gone from TF 2, so this is the small equivalent.
    """

    def __init__(self, num_ps: int):
        self.loads = [0] * num_ps

    def __call__(self, op) -> int:
        size = 1
        try:
            shape = tf.TensorShape(op.get_attr("shape"))
            dtype = tf.as_dtype(op.get_attr("dtype"))
            for dim in shape.as_list():
                size *= dim or 1
            size *= dtype.size
        except (ValueError, TypeError):
            pass
        index = min(range(len(self.loads)), key=self.loads.__getitem__)
        self.loads[index] += size
        return index


COLLECTIVE_LEADER = "/job:worker/replica:0/task:0"


def session_config(num_workers: int, task_index: int, intra: int, inter: int, spin: bool = True) -> v1.ConfigProto:
    # Device filters keep a worker from waiting on, or talking to, the other workers (a collective reaches
    # them through its group, resolved by the leader).
    config = v1.ConfigProto(
        intra_op_parallelism_threads=intra,
        inter_op_parallelism_threads=inter,
        device_filters=["/job:ps", f"/job:worker/task:{task_index}"],
        allow_soft_placement=False,
    )
    config.experimental.collective_group_leader = COLLECTIVE_LEADER
    config.experimental.disable_thread_spinning = not spin  # node/threads.py: off where tasks share the cores
    return config


def start_servers(ps_hosts, worker_hosts, task_index: int, intra: int, inter: int, spin: bool = True):
    """Start this node's worker server and, if it hosts one, its PS task in the same process (the paper
    colocates them); `ps_hosts` lists the PS tasks, on nodes 0..len-1. The PS server is None on other nodes.
    `spin`: whether idle pool threads may spin for work (node/threads.py)."""
    cluster = tf.train.ClusterSpec({"ps": list(ps_hosts), "worker": list(worker_hosts)})
    threads = v1.ConfigProto(intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter)
    # The servers resolve collective groups (BSP's all-reduce) through worker 0, as every session does.
    threads.experimental.collective_group_leader = COLLECTIVE_LEADER
    threads.experimental.disable_thread_spinning = not spin
    ps = None
    if task_index < len(ps_hosts):
        ps = tf.distribute.Server(cluster, job_name="ps", task_index=task_index, config=threads, start=True)
    worker = tf.distribute.Server(cluster, job_name="worker", task_index=task_index, config=threads, start=True)
    return cluster, ps, worker



def checkpointed(graph) -> list:
    """The variables a checkpoint holds: every global variable but the protocols' own state."""
    state = {v.ref() for v in graph.get_collection(ENGINE_STATE)}
    return [v for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES) if v.ref() not in state]



def _model(graph, launch, module, params: dict, batch: int, optimizer, train_examples: int | None) -> Model:
    """The input pipeline (this worker's shard, repeated) and the user's model on the shared variables."""
    n, index, path = launch.num_workers, launch.task_index, launch.script_path
    feeds: dict = {}  # large arrays the input_fn gave tf.data, fed at each start of the iterator
    ds = scriptmod.call_input_fn(module, path, "train", batch, params, feeds)
    # Each worker reads every n-th batch (checked to hold `batch` examples). The workload's length is syncswitch's
    # (epochs x examples), so the set is repeated here: a script that does not repeat it would end its workers early.
    ds = batch_check.checked(ds, path, batch, train_examples).shard(n, index).repeat()
    # One batch read ahead on the pipeline's own thread, as TF's input guide ends every pipeline: the next step's
    # batch is made while this step computes and while it waits for its peers (an all-reduce's wait leaves the
    # core idle). The same batches in the same order; a restart of the iterator empties the buffer.
    ds = ds.prefetch(1)
    options = tf.data.Options()
    options.threading.private_threadpool_size = max(1, launch.intra_threads or 1)
    ds = ds.with_options(options)
    # Initializable, not one-shot: an input_fn may capture a lookup table or a variable (a text job's
    # vocabulary), which a one-shot iterator refuses; it is initialized after the tables (local init).
    iterator = v1.data.make_initializable_iterator(ds)
    features, labels = iterator.get_next()
    before = set(graph.get_operations())
    out = scriptmod.call_model_fn(module, path, features, labels, params, True)
    collected = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
    made = [op for op in graph.get_operations() if op not in before]
    # Keras layers' own update ops (BatchNormalization's moving statistics) are in no collection here.
    extra = orphan_updates(graph, made, [out["loss"], out["logits"], *collected])
    if extra:
        print(f"syncswitch: model_fn made {len(extra)} update op(s) outside UPDATE_OPS (e.g. "
              f"{extra[0].name}); they run with every step", file=sys.stderr, flush=True)
    with tf.control_dependencies(collected + extra):
        loss = tf.identity(out["loss"], name="train_loss")
    trained = {v.op for v in v1.trainable_variables()} & ancestors([loss])
    if not trained:
        raise scriptmod.ScriptError(f"script {path}: model_fn's loss depends on no trainable variable")
    grads = Gradients(optimizer, loss, path)
    made_set = set(made)
    own = [u for u in collected + extra if getattr(u, "op", u) in made_set]
    return Model(loss=loss, grads=grads, iterator=iterator, made=made, own_updates=own, raw_loss=out["loss"],
                 input_feeds=feeds)


def _replica(graph, launch, protocols, model: Model):
    """The worker's copy of the model, where a protocol steps on one; None where none does. BSP alone only
    prefers one (its all-reduce path): a model the replica cannot copy trains through the parameter servers."""
    # BSP steps on a replica only where a phase asks for its all-reduce path (the `allreduce` parameter).
    allreduce = any(params.get("allreduce") for params in _bsp_params(launch))
    protocols = [p for p in protocols if p != "bsp" or allreduce]
    if not needs_replica(protocols):
        return None
    device = f"/job:worker/task:{launch.task_index}"
    if _calls_functions(model.made):
        # A loop's or a cond's gradient rewrites its forward function in place, under the function's name with
        # "_rewritten" added; the replica's copy calls the same functions, so whichever model is differentiated
        # second would add a different function under that name (a GRU: "duplicate function ... definitions
        # differ"). The shared model's gradients first: the copy then calls the rewritten functions, whose
        # gradients need no second rewrite.
        len(model.grads)
    try:
        return replicamod.build(graph, model.made, model.raw_loss, model.own_updates, device, launch.script_path)
    except scriptmod.ScriptError:
        if any(p != "bsp" and needs_replica([p]) for p in protocols):
            raise
        return None


def _calls_functions(ops) -> bool:
    """Whether any of `ops` calls a graph function (tf.while_loop, tf.cond, an RNN layer, a tf.function)."""
    return any(value.func.name or value.list.func for op in ops for value in op.node_def.attr.values())


def _saving(graph, iterator, input_feeds: dict):
    """(saver, scaffold): the chief gathers every variable and writes one checkpoint; protocol state (clocks,
    counters) stays out, since a relaunch may build protocols the checkpoint never held."""
    saved = checkpointed(graph)
    saver = v1.train.Saver(saved, max_to_keep=None, sharded=False, save_relative_paths=True)
    # A session restored from a checkpoint initializes the protocol state the checkpoint lacks in its
    # local init (every worker, before any phase; the chief's phase entry sets it for each phase).
    state = v1.variables_initializer(graph.get_collection(ENGINE_STATE))
    local_init = tf.group(v1.train.Scaffold.default_local_init_op(), state)
    with tf.control_dependencies([local_init]):  # the input pipeline may look words up in the tables
        local_init = tf.group(iterator.initializer)
    scaffold = v1.train.Scaffold(
        saver=saver, ready_for_local_init_op=v1.report_uninitialized_variables(saved), local_init_op=local_init,
        local_init_feed_dict=input_feeds or None)
    scaffold.finalize()
    return saver, scaffold


def _one_batch(launch, protocols) -> int:
    # One input pipeline and one model: the user's model_fn must be called once so its variables exist once;
    # protocols built into one graph therefore share the per-worker batch.
    batch_by_protocol = {p.protocol: p.config.per_worker_batch for p in launch.phases}
    batches = {batch_by_protocol[p] for p in protocols}
    if len(batches) != 1:
        raise ValueError(f"protocols {protocols} built into one graph need one per-worker batch, "
                         f"got {sorted(batches)}; use switch_mode relaunch")
    return batches.pop()


def _bsp_ps(launch) -> bool:
    """Whether a BSP phase this launch builds aggregates on the parameter servers. Every phase a run enters has the
    parameters of one of its launch's phases or the catalog's defaults (a fall-back, greedy's owed share), which
    take all-reduce; SyncReplicasOptimizer's path (its accumulators, token queue, chief queue runner and warm-up
    step: a second of a node's start-up on 2 cores) is built only where one asks for it."""
    return any(wants_ps(params) for params in _bsp_params(launch, built=True))


def _bsp_params(launch, built: bool = False) -> list[dict]:
    """The parameters of the launch's BSP phases (with `built`, of those it builds), read from the wire one way."""
    return [codec.from_struct(p.params) for p in launch.phases if p.protocol == "bsp" and (p.build or not built)]


def build(launch, total: int, module, params: dict, cluster, train_examples: int | None = None) -> TrainGraph:
    """The worker graph for `launch` (a wire Launch) training `total` samples with the user's `module`, whose
    num_examples('train') the task asked where it needed it (`train_examples`: the batch check's first batch)."""
    index = launch.task_index
    protocols = sorted({p.protocol for p in launch.phases if p.build})
    batch_by_protocol = {p.protocol: p.config.per_worker_batch for p in launch.phases}
    batch = _one_batch(launch, protocols)
    graph = tf.Graph()
    with graph.as_default():
        # The job's seed fixes the initialization: TensorFlow's ops take theirs from the graph's seed, an initializer
        # without its own seed (Keras' defaults) from Keras' seed generator, and a user's model_fn may draw from
        # Python's or numpy's random state: each starts differently in every process unless seeded here.
        scriptmod.seed_random_state(launch.seed)
        setter = v1.train.replica_device_setter(
            ps_tasks=len(launch.ps_hosts), worker_device=f"/job:worker/task:{index}", cluster=cluster,
            ps_strategy=GreedyByteStrategy(len(launch.ps_hosts)))
        with v1.device(setter):
            global_step = v1.train.get_or_create_global_step()
            # Colocated with the global step: the BSP token queue lives there, so reading the
            # counter after a token costs no cross-task hop.
            with v1.variable_scope("syncswitch"), v1.colocate_with(global_step):
                samples = v1.get_variable("samples", [], tf.int64, v1.zeros_initializer(), trainable=False)
                settings = build_settings(launch, total, samples)
            optimizer = v1.train.MomentumOptimizer(settings.learning_rate, settings.momentum_now)
            model = _model(graph, launch, module, params, batch, optimizer, train_examples)
            replica = _replica(graph, launch, protocols, model)
            engines = build_engines(protocols, optimizer, model.grads, global_step, samples, batch_by_protocol,
                                    launch.num_workers, index == 0, task_index=index, replica=replica,
                                    rates=(settings.learning_rate, settings.momentum_now), schedule=settings.schedule,
                                    bsp_ps=_bsp_ps(launch), update_log=launch.update_log, clip_norm=launch.clip_norm,
                                    compression=launch.compression or None)
            if index == 0:  # the chief's checkpoints: replica engines copy at the step, write beside training
                saved = checkpointed(graph)
                for engine in engines.values():
                    engine.add_snapshot(saved, global_step, samples)
        saver, scaffold = _saving(graph, model.iterator, model.input_feeds)
    return TrainGraph(graph=graph, engines=engines, loss=model.loss, losses=LiveLosses(engines), samples=samples,
                      global_step=global_step, settings=settings, total_samples=total, saver=saver, scaffold=scaffold,
                      input_start=model.iterator.initializer, input_feeds=model.input_feeds)
