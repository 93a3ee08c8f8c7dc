"""BSP by all-reduce, and local SGD averaged by all-reduce every step, against one worker: n workers at batch B for
k steps take the steps one worker takes at batch nB, momentum and the rate schedule included. Real TF servers in
one process, each worker's graph built as a node builds it (syncswitch/node/graph.py), the workers stepping in
threads (a collective waits for all of them)."""

import json
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("tensorflow")

SCRIPT = '''
import tensorflow as tf

def input_fn(split, batch_size, params):
    x = tf.random.stateless_normal([96, 4], seed=[1, 2])
    y = tf.cast(x[:, 0] + 0.5 * x[:, 1] > 0, tf.int64)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size, drop_remainder=True)

def model_fn(features, labels, params, training):
    # Seeded initializers: the graphs compared differ in their other ops, so op-order seeds would differ.
    init = tf.keras.initializers.RandomNormal(stddev=0.5, seed=3)
    hidden = tf.keras.layers.Dense(8, activation="tanh", kernel_initializer=init)(features)
    logits = tf.keras.layers.Dense(2, kernel_initializer=init)(hidden)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
'''

# Embeddings (their gradients IndexedSlices) looked up by sparse ids of varying count per example: each worker's
# batch touches a different number of rows (BSP gathers a large table's, padded to the group's largest count).
EMBEDDING_SCRIPT = '''
import tensorflow as tf

def input_fn(split, batch_size, params):
    ids = tf.random.stateless_uniform([96, 5], seed=[4, 5], maxval=40, dtype=tf.int64)
    keep = tf.random.stateless_uniform([96, 5], seed=[6, 7]) < 0.6
    ids = tf.where(keep, ids + 1, tf.zeros_like(ids))  # 0: no id
    y = tf.cast(tf.reduce_sum(tf.cast(ids > 20, tf.int64), 1) > 1, tf.int64)
    return tf.data.Dataset.from_tensor_slices((ids, y)).batch(batch_size, drop_remainder=True)

def model_fn(features, labels, params, training):
    table = tf.compat.v1.get_variable("table", [41, 6], initializer=tf.compat.v1.random_normal_initializer(
        stddev=0.5, seed=3))
    # 264k elements: over sparse_gather.GATHER_FROM, its rows are gathered; the small table's ride in the all-reduce
    big = tf.compat.v1.get_variable("big", [44000, 6], initializer=tf.compat.v1.random_normal_initializer(
        stddev=0.5, seed=4))
    ids = tf.sparse.from_dense(features)
    pooled = tf.nn.embedding_lookup_sparse(table, ids, None, combiner="sum")
    pooled += tf.nn.embedding_lookup_sparse(big, ids, None, combiner="mean")
    pooled = tf.reshape(pooled, [-1, 6])
    logits = tf.keras.layers.Dense(2, kernel_initializer=tf.keras.initializers.RandomNormal(stddev=0.5, seed=3))(
        pooled)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
'''

# The cluster and its sessions, every worker entered into `protocol` (tests/protocols/test_snapshot.py too).
SETUP = '''
import json, os, socket, sys, threading
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from syncswitch.node import graph as graphmod
from syncswitch.node import script as scriptmod
from syncswitch.node.state import TrainState
from syncswitch.wire import agent_pb2 as pb

v1 = tf.compat.v1
v1.disable_eager_execution()
path, n, batch, steps, protocol = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
params = json.loads(sys.argv[6])
clip_norm = float(os.environ.get("CLIP_NORM", "0"))  # hyperparameters.clip_norm; 0: none
compression = os.environ.get("COMPRESSION", "")  # hyperparameters.compression; empty: float32
total = n * batch * steps


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ps_hosts, workers = [f"127.0.0.1:{free_port()}"], [f"127.0.0.1:{free_port()}" for _ in range(n)]
servers, graphs = [], []
for i in range(n):
    launch = pb.Launch(task_index=i, num_workers=n, ps_hosts=ps_hosts, worker_hosts=workers, script_path=path,
                       seed=1, lr_decay=pb.LrDecay(boundaries=[0.5], factors=[0.1]), clip_norm=clip_norm,
                       compression=compression)
    phase = launch.phases.add(protocol=protocol, build=True, until=1.0)
    phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = batch, 0.2, 0.9
    phase.params.update(params)
    cluster, ps, worker = graphmod.start_servers(ps_hosts, workers, i, 1, 2)
    servers.append((ps, worker))
    graphs.append(graphmod.build(launch, total, scriptmod.load_script(path), {}, cluster))
sessions = [v1.Session(servers[i][1].target, graph=g.graph, config=graphmod.session_config(n, i, 1, 2))
            for i, g in enumerate(graphs)]
chief, g0 = sessions[0], graphs[0]
chief.run(g0.scaffold.init_op)
for s, g in zip(sessions, graphs):
    s.run(g.scaffold.local_init_op)
st = g0.settings
chief.run([st.set_lr, st.set_momentum, st.set_ramp], {st.lr_in: 0.2, st.momentum_in: 0.9, st.ramp_in: 0.0,
                                                        st.warmup_in: 0.0})
g0.engines[protocol].enter_chief(chief, params)
for s, g in zip(sessions, graphs):
    g.engines[protocol].enter_worker(s, params)
'''

DRIVER = SETUP + '''
losses = {}


def work(i):
    engine, state = graphs[i].engines[protocol], TrainState(total, i)
    state.boundary = 1.0
    fetches = [engine.train_op, engine.samples_after, graphs[i].losses.get(protocol, graphs[i].loss)]
    for _ in range(steps):
        _, state.samples, loss = sessions[i].run(fetches)
        losses.setdefault(i, []).append(float(loss))
        engine.after_step(sessions[i], state)


trained = sorted(g0.graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES), key=lambda v: v.op.name)
start = chief.run(trained)
threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=60)
assert not any(t.is_alive() for t in threads), "a worker stayed blocked in the all-reduce"
values = chief.run(trained)
out = {"vars": {v.op.name: a.tolist() for v, a in zip(trained, values)},
       "start": {v.op.name: a.tolist() for v, a in zip(trained, start)},
       "samples": int(chief.run(g0.samples)), "global_step": int(chief.run(g0.global_step)), "losses": losses,
       "allreduce": bool(g0.engines[protocol].stats(chief).get("allreduce", False))}
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)  # in-process TF servers cannot be stopped: the process goes, and they with it
'''


def _run(tmp_path, n, batch, steps, protocol, params=None, driver_text=DRIVER, script_text=SCRIPT, clip_norm=0.0,
         compression=""):
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent(script_text))
    driver = tmp_path / "driver.py"
    driver.write_text(driver_text)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "2", "CLIP_NORM": str(clip_norm),
           "COMPRESSION": compression}
    done = subprocess.run([sys.executable, str(driver), str(script), str(n), str(batch), str(steps), protocol,
                           json.dumps(params or {})],
                          capture_output=True, text=True, timeout=240, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.cluster
def test_n_workers_at_batch_b_step_as_one_worker_at_batch_nb(tmp_path):
    steps = 6  # the rate decays x0.1 half-way: the schedule runs on the workers' own count
    many = _run(tmp_path, 2, 8, steps, "bsp", {"allreduce": True})
    one = _run(tmp_path, 1, 16, steps, "asp")
    assert many["allreduce"]
    assert many["samples"] == one["samples"] == 16 * steps
    assert many["global_step"] == one["global_step"] == steps
    for name, value in one["vars"].items():
        np.testing.assert_allclose(many["vars"][name], value, rtol=2e-5, atol=2e-6, err_msg=name)
    # Every worker watched the group's mean loss: one worker's loss at batch nB.
    np.testing.assert_allclose(many["losses"]["0"], one["losses"]["0"], rtol=2e-5)
    assert many["losses"]["0"] == many["losses"]["1"]


@pytest.mark.cluster
def test_an_embeddings_rows_are_gathered_and_step_as_one_worker_at_batch_nb(tmp_path):
    """BSP's all-reduce gathers an embedding's rows (IndexedSlices), not the dense table: the step is still one
    worker's at batch nB, its sparse momentum update included (the rows no batch touched keep their momentum
    unapplied, as on the parameter servers and in one process), with row counts that differ between workers."""
    steps = 6
    many = _run(tmp_path, 3, 8, steps, "bsp", {"allreduce": True}, script_text=EMBEDDING_SCRIPT)
    one = _run(tmp_path, 1, 24, steps, "asp", script_text=EMBEDDING_SCRIPT)
    assert many["allreduce"]
    assert {"table", "big"} <= set(one["vars"])
    for name, value in one["vars"].items():
        np.testing.assert_allclose(many["vars"][name], value, rtol=2e-5, atol=2e-6, err_msg=name)
    np.testing.assert_allclose(many["losses"]["0"], one["losses"]["0"], rtol=2e-5)


@pytest.mark.cluster
@pytest.mark.parametrize("script,n,allreduce", [(SCRIPT, 2, True), (EMBEDDING_SCRIPT, 3, True), (SCRIPT, 2, False)],
                         ids=["all-reduce", "all-reduce-embeddings", "parameter-servers"])
def test_a_clipped_step_is_one_workers_at_batch_nb_clipped(tmp_path, script, n, allreduce):
    """hyperparameters.clip_norm under BSP clips the group's mean gradient, as Keras clips after
    MultiWorkerMirroredStrategy aggregates: the steps of one worker at batch nB with the same clip (an embedding's
    gathered and in-buffer rows counted by their dense sum; on the parameter servers, SyncReplicasOptimizer's
    aggregate). The norm, 0.01, is under every step's gradient."""
    steps = 6
    many = _run(tmp_path, n, 8, steps, "bsp", {"allreduce": allreduce}, script_text=script, clip_norm=0.01)
    one = _run(tmp_path, 1, 8 * n, steps, "asp", script_text=script, clip_norm=0.01)
    assert many["allreduce"] == allreduce
    for name, value in one["vars"].items():
        np.testing.assert_allclose(many["vars"][name], value, rtol=2e-5, atol=2e-6, err_msg=name)
        assert not np.allclose(value, one["start"][name], rtol=0, atol=1e-7), name  # it trained


@pytest.mark.cluster
@pytest.mark.parametrize("protocol,n", [("local-sgd", 2), ("b-fasgd", 1)])
def test_engines_that_differentiate_their_replica_clip_its_gradient(tmp_path, protocol, n):
    """Local SGD by all-reduce and B-FASGD take their gradients on the worker's replica, not the shared model's:
    each clips its own. At a norm of 1e-7 the model stays where it started (momentum 0.9, 6 steps at rate 0.2:
    each variable moves under 1e-5), where unclipped it moves."""
    for clip, moved in ((1e-7, False), (0.0, True)):
        out = _run(tmp_path, n, 8, 6, protocol, {"period": 1} if protocol == "local-sgd" else {}, clip_norm=clip)
        for name, value in out["vars"].items():
            assert np.allclose(value, out["start"][name], rtol=0, atol=1e-5) != moved, (name, clip)


@pytest.mark.cluster
def test_local_sgd_averaged_every_step_by_all_reduce_is_one_worker_at_batch_nb(tmp_path):
    steps = 6
    many = _run(tmp_path, 2, 8, steps, "local-sgd", {"period": 1})
    one = _run(tmp_path, 1, 16, steps, "asp")
    assert many["allreduce"]  # the collective path, not the parameter servers'
    assert many["samples"] == one["samples"] == 16 * steps
    assert many["global_step"] == one["global_step"] == steps
    for name, value in one["vars"].items():
        np.testing.assert_allclose(many["vars"][name], value, rtol=2e-5, atol=2e-6, err_msg=name)


@pytest.mark.cluster
@pytest.mark.parametrize("compression", ["fp16", "bf16"])
def test_a_compressed_bsp_step_is_one_workers_at_batch_nb_to_the_wire_types_precision(tmp_path, compression):
    """hyperparameters.compression: the gradients travel as 16-bit floats, so the steps are one worker's at batch nB
    to that type's precision, not to float32's; the loss the hooks watch travels in float32 beside them."""
    steps = 6
    many = _run(tmp_path, 3, 8, steps, "bsp", {"allreduce": True}, compression=compression)
    exact = _run(tmp_path, 3, 8, steps, "bsp", {"allreduce": True})
    one = _run(tmp_path, 1, 24, steps, "asp")
    assert many["allreduce"] and many["samples"] == one["samples"] and many["global_step"] == steps
    rounded = 0
    for name, value in one["vars"].items():
        np.testing.assert_allclose(many["vars"][name], value, rtol=1e-2, atol=1e-3, err_msg=name)
        rounded += not np.allclose(many["vars"][name], exact["vars"][name], rtol=2e-5, atol=2e-6)
    assert rounded  # the wire type was used
    np.testing.assert_allclose(many["losses"]["0"], one["losses"]["0"], rtol=5e-3)
    assert many["losses"]["0"] == many["losses"]["1"] == many["losses"]["2"]


# As DRIVER, and after each step every worker's copy and momentum of the first trained variable (local SGD).
STATE_DRIVER = DRIVER.replace("""        engine.after_step(sessions[i], state)
""", """        engine.after_step(sessions[i], state)
        pair = next(p for p in engine._core.pairs if "Momentum" not in p[0].op.name)
        slot = engine._core.optimizer.get_slot(pair[1], "momentum")
        copy, velocity = sessions[i].run([pair[1], slot])
        states.setdefault(i, []).append([copy.ravel().tolist(), velocity.ravel().tolist()])
""").replace("losses = {}", "losses = {}\nstates = {}").replace('"losses": losses,',
                                                              '"losses": losses, "states": states,')
assert '"states": states' in STATE_DRIVER and "states.setdefault" in STATE_DRIVER


@pytest.mark.cluster
def test_local_sgd_averages_the_copies_and_leaves_each_workers_momentum_until_the_phase_ends(tmp_path):
    """An average moves the copies alone (half the bytes): after it every worker holds the same copy and its own
    momentum; the phase's end averages the momenta too, so the next phase continues from the group's mean."""
    out = _run(tmp_path, 2, 8, 5, "local-sgd", {"period": 2}, driver_text=STATE_DRIVER)
    first, second = out["states"]["0"], out["states"]["1"]
    for step in (1, 3):  # after steps 2 and 4: averaged
        assert first[step][0] == second[step][0]
        assert not np.allclose(first[step][1], second[step][1])
    assert first[0][0] != second[0][0]  # after step 1: each its own copy
    assert first[4] == second[4]  # the boundary, after step 5: copies and momenta averaged
    assert out["allreduce"]


@pytest.mark.cluster
def test_compressed_local_sgd_sends_each_copys_move_and_keeps_the_copies_equal_after_an_average(tmp_path):
    """Compressed, an average sends each copy's move since the last one (the copies themselves would lose their
    low bits in 16-bit floats): after it every worker holds the same float32 copy, near the uncompressed run's."""
    out = _run(tmp_path, 2, 8, 5, "local-sgd", {"period": 2}, driver_text=STATE_DRIVER, compression="bf16")
    exact = _run(tmp_path, 2, 8, 5, "local-sgd", {"period": 2}, driver_text=STATE_DRIVER)
    first, second = out["states"]["0"], out["states"]["1"]
    for step in (1, 3):  # after steps 2 and 4: averaged
        assert first[step][0] == second[step][0]
        assert not np.allclose(first[step][1], second[step][1])
    assert first[4] == second[4]  # the boundary: copies and momenta averaged
    for name, value in exact["vars"].items():
        np.testing.assert_allclose(out["vars"][name], value, rtol=1e-2, atol=1e-3, err_msg=name)
    assert out["vars"] != exact["vars"]
    # A weight of the copy (about 0.5) keeps float32's bits: bfloat16 would leave 8 of them.
    weights = np.array(first[4][0], np.float32)
    assert not np.array_equal(weights.astype(ml_dtypes.bfloat16).astype(np.float32), weights)


# As DRIVER, but each step as the training loop runs it: in one call with the average where the engine says so.
FUSED_DRIVER = DRIVER.replace("""        _, state.samples, loss = sessions[i].run(fetches)
""", """        fused = engine.averaging_step(state)
        if fused is None:
            _, state.samples, loss = sessions[i].run(fetches)
        else:
            if state.stop_flag():
                sessions[i].run(fused.stop.raise_op)
            _, samples, stop, _, loss = sessions[i].run([fused.train_op, fused.samples_after, fused.agreed_stop,
                                                         fused.collective_wait_s, fetches[2]])
            state.after_collective_step(int(samples), bool(stop))
            fused_calls[i] = fused_calls.get(i, 0) + 1
""").replace("state.boundary = 1.0", "state.boundary, state.step_samples = 1.0, n * batch").replace(
    "losses = {}", "losses = {}\nfused_calls = {}").replace(
    '"losses": losses,', '"losses": losses, "fused_calls": fused_calls,')
assert "averaging_step" in FUSED_DRIVER and '"fused_calls": fused_calls' in FUSED_DRIVER


@pytest.mark.cluster
def test_local_sgd_steps_that_hold_their_average_train_as_steps_averaged_apart(tmp_path):
    """The loop runs local SGD's period-ending step and its average in one call: the same model, losses and count
    as the step and the average in two calls, bit for bit (3 workers, period 2, 7 steps: the boundary falls
    mid-period, where the last average is the boundary's)."""
    apart = _run(tmp_path, 3, 8, 7, "local-sgd", {"period": 2})
    together = _run(tmp_path, 3, 8, 7, "local-sgd", {"period": 2}, driver_text=FUSED_DRIVER)
    assert together["fused_calls"] == {"0": 4, "1": 4, "2": 4}  # steps 2, 4, 6 and the boundary's 7
    assert together["vars"] == apart["vars"]
    assert together["losses"] == apart["losses"]
    assert together["samples"] == apart["samples"] == 3 * 8 * 7
    assert together["global_step"] == apart["global_step"]


WARM_DRIVER = SETUP + '''
engine = [g.engines[protocol] for g in graphs]
engine = [getattr(e, "fast", None) or e for e in engine]  # BSP: its all-reduce path
shared = sorted(g0.graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES), key=lambda v: v.op.name)
before = chief.run(shared)
threads = [threading.Thread(target=engine[i].before_warm_up, args=(sessions[i],)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=60)
assert not any(t.is_alive() for t in threads), "a worker stayed blocked in its warm-up"
after = chief.run(shared)
changed = [v.op.name for v, a, b in zip(shared, before, after) if not (a == b).all()]
print("RESULT " + json.dumps({"changed": changed, "checked": len(shared)}), flush=True)
os._exit(0)
'''


@pytest.mark.cluster
@pytest.mark.parametrize("protocol,params", [("bsp", {"allreduce": True}), ("local-sgd", {"period": 2})])
def test_the_warm_up_pays_the_chiefs_publish_without_moving_the_shared_model(tmp_path, protocol, params):
    """The warm-up enters the phase and the chief publishes once (its first call registers the write-back's graph
    partitions on the parameter servers before training, not while the group waits at the phase's end): what
    it writes back is what entry read, so every shared variable, momentum, count and global step stays put."""
    out = _run(tmp_path, 2, 8, 1, protocol, params, driver_text=WARM_DRIVER)
    assert out["checked"] > 4
    assert out["changed"] == []
