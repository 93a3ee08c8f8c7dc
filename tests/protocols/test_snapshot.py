"""A replica engine's checkpoint written beside training (replica_training.Snapshot, node/background_save.py) holds
what the checkpoint after `publish` holds at the same step, to the bit, while the workers step on during the write.
Real TF servers in one process, each worker's graph built as a node builds it (tests/protocols/test_allreduce.py)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.protocols.test_allreduce import SCRIPT, SETUP

pytest.importorskip("tensorflow")

DRIVER = SETUP + '''
import numpy as np
from syncswitch.node.background_save import BackgroundWrites

out_dir = sys.argv[7]
for sub in ("sync", "beside", "during", "later"):
    os.makedirs(os.path.join(out_dir, sub))


def run_steps(k):
    def work(i):
        engine, state = graphs[i].engines[protocol], TrainState(total, i)
        state.boundary = 1.0
        for _ in range(k):
            _, state.samples = sessions[i].run([engine.train_op, engine.samples_after])
            engine.after_step(sessions[i], state)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a worker stayed blocked in a collective"


def saved(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()}


engine = g0.engines[protocol]
run_steps(3)
_, step = chief.run([engine.snapshot.take, engine.snapshot.global_step])
paths = []
writes = BackgroundWrites()
writes.start(lambda: paths.append(engine.snapshot.saver.save(
    chief, os.path.join(out_dir, "beside", "model.ckpt"), global_step=int(step), write_meta_graph=False)))
writes.wait()  # written before anything publishes: the parameter servers still hold the phase's entry
engine.publish(chief)  # the synchronous path at the same step: publish, then the checkpoints' own saver
synchronous = g0.saver.save(chief, os.path.join(out_dir, "sync", "model.ckpt"), global_step=chief.run(g0.global_step),
                            write_meta_graph=False)
_, step = chief.run([engine.snapshot.take, engine.snapshot.global_step])  # a second copy, at step 3 too
writes.start(lambda: paths.append(engine.snapshot.saver.save(
    chief, os.path.join(out_dir, "during", "model.ckpt"), global_step=int(step), write_meta_graph=False)))
run_steps(3)  # the replicas move on while it is written
writes.wait()
engine._published = False  # the steps since moved the chief's replica: publish it again
engine.publish(chief)
later = g0.saver.save(chief, os.path.join(out_dir, "later", "model.ckpt"), global_step=chief.run(g0.global_step),
                      write_meta_graph=False)
g0.saver.restore(chief, paths[0])  # the checkpoints' own saver reads it
trained = g0.graph.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES)
restored, parts = {}, {}
for v, a in zip(trained, chief.run(trained)):
    info = getattr(v, "_save_slice_info", None)  # a partitioned variable's part: checkpointed as the whole
    if info is None:
        restored[v.op.name] = a.tolist()
    else:
        parts.setdefault(info.full_name, []).append((info.var_offset[0], a))
for name, pieces in parts.items():
    restored[name] = np.concatenate([a for _, a in sorted(pieces, key=lambda p: p[0])]).tolist()
out = {"names": [os.path.basename(synchronous), os.path.basename(paths[0])],
       "latest": tf.train.latest_checkpoint(os.path.join(out_dir, "beside")),
       "sync": {k: v.tolist() for k, v in saved(synchronous).items()},
       "beside": {k: v.tolist() for k, v in saved(paths[0]).items()},
       "during": {k: v.tolist() for k, v in saved(paths[1]).items()},
       "later": {k: v.tolist() for k, v in saved(later).items()}, "restored": restored}
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)
'''


# A TF1 parameter-server user's sharded variable: a hidden layer's kernel in two parts (fixed_size_partitioner),
# checkpointed as slices of one variable.
PARTITIONED_SCRIPT = SCRIPT.replace(
    '''    hidden = tf.keras.layers.Dense(8, activation="tanh", kernel_initializer=init)(features)''',
    '''    kernel = tf.compat.v1.get_variable("sharded", [4, 8], initializer=init,
                                       partitioner=tf.compat.v1.fixed_size_partitioner(2))
    hidden = tf.tanh(tf.matmul(features, kernel))''')
assert PARTITIONED_SCRIPT != SCRIPT


def _run(tmp_path, protocol, params, script_text=SCRIPT):
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent(script_text))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, str(driver), str(script), "2", "8", "12", protocol, json.dumps(params),
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=240, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.cluster
@pytest.mark.parametrize("protocol, params, script", [("bsp", {"allreduce": True}, SCRIPT),
                                                       ("local-sgd", {"period": 2}, SCRIPT),
                                                       ("bsp", {"allreduce": True}, PARTITIONED_SCRIPT)],
                         ids=["bsp", "local-sgd", "bsp-partitioned"])
def test_checkpoint_written_beside_training_is_the_published_one(tmp_path, protocol, params, script):
    out = _run(tmp_path, protocol, params, script)
    synchronous, later = out["sync"], out["later"]
    assert out["names"][0] == out["names"][1] == "model.ckpt-3"  # the global step at the copy
    assert out["latest"].endswith("beside/model.ckpt-3")
    for copy in (out["beside"], out["during"]):  # written before the publish, and while the workers stepped on
        assert sorted(copy) == sorted(synchronous)
        for name, value in synchronous.items():  # every variable, the momentum and the counts: the same bits
            np.testing.assert_array_equal(np.asarray(copy[name]), np.asarray(value), err_msg=name)
    assert synchronous["global_step"] == 3 and synchronous["syncswitch/samples"] == 3 * 16
    if script is PARTITIONED_SCRIPT:  # both parts saved as the one variable, in its full shape
        assert np.asarray(synchronous["sharded"]).shape == (4, 8)
    assert later["global_step"] == 6  # the workers stepped on while it was written, and the model moved
    moved = [k for k, v in out["restored"].items() if not np.array_equal(np.asarray(later[k]), np.asarray(v))]
    assert moved, "the later model equals the copy: the test would not see a copy taken too late"
    for name, value in out["restored"].items():  # restored by the checkpoints' own saver
        np.testing.assert_array_equal(np.asarray(value), np.asarray(synchronous[name]), err_msg=name)
