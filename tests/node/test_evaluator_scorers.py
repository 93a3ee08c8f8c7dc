"""The real evaluator process: once asked for more scorers (training has ended), it scores checkpoints at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

# A scoring marks itself in progress (a file in MEET) and, until two scorings were seen in progress at once, waits
# for a second one (30 s at most, in all): with one scorer at a time they never meet. The meeting is in the test split's
# generator (the input pipeline) or in an op of the model (the scorer's session runs it on its inter-op threads).
SCRIPT = """
import os, time, uuid
import numpy as np
import tensorflow as tf

MEET, WHERE = os.environ["MEET"], os.environ["MEET_IN"]


def _meet():
    mine = os.path.join(MEET, "scoring-" + uuid.uuid4().hex)
    open(mine, "w").close()
    deadline = time.time() + 30
    while not any(os.path.exists(os.path.join(MEET, end)) for end in ("met", "gave-up")):
        if sum(name.startswith("scoring-") for name in os.listdir(MEET)) >= 2:
            open(os.path.join(MEET, "met"), "w").close()
        elif time.time() > deadline:  # once: the later scorings (a model op runs once a batch) need not wait
            open(os.path.join(MEET, "gave-up"), "w").close()
        time.sleep(0.01)
    return mine


def _examples():
    mine = _meet() if WHERE == "input" else None
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = rng.normal(size=4).astype("float32")
        yield x, int(x[0] > 0)
    if mine:
        os.unlink(mine)


def _meet_op(x):
    os.unlink(_meet())
    return x


def input_fn(split, batch_size, params):
    spec = (tf.TensorSpec([4], tf.float32), tf.TensorSpec([], tf.int64))
    return tf.data.Dataset.from_generator(_examples, output_signature=spec).batch(batch_size)


def model_fn(features, labels, params, training):
    if WHERE == "model" and not training:
        features = tf.reshape(tf.py_function(_meet_op, [features], tf.float32), [-1, 4])
    logits = tf.keras.layers.Dense(2, name="out")(features)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {"loss": tf.reduce_mean(loss), "logits": logits}
"""


def _checkpoints(script, folder, n):
    """`n` checkpoints of the script's model, as the chief writes them (a v1 saver of the global variables)."""
    code = f"""
import os, sys, json
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
v1 = tf.compat.v1
v1.disable_eager_execution()
sys.path.insert(0, {os.path.dirname(script)!r})
import script as m
m.model_fn(v1.placeholder(tf.float32, [None, 4]), v1.placeholder(tf.int64, [None]), {{}}, True)
saver = v1.train.Saver(max_to_keep=None)
with v1.Session() as s:
    s.run(v1.global_variables_initializer())
    print(json.dumps([saver.save(s, {os.path.join(folder, "model.ckpt")!r}, global_step=i, write_meta_graph=False)
                      for i in range({n})]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, MEET=folder, MEET_IN="input"))
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("meet_in", ["input", "model"])
def test_more_scorers_score_the_backlog_at_once_each_checkpoint_once(tmp_path, meet_in):
    """Also the model's ops: two scorers run them at once, not one after the other on a shared thread pool."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    paths = _checkpoints(str(script), str(tmp_path), 8)
    meet = tmp_path / "meet"
    meet.mkdir()
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL="2", MEET=str(meet),
               MEET_IN=meet_in)
    log = open(tmp_path / "evaluator.log", "w")
    proc = subprocess.Popen([sys.executable, "-u", "-m", "syncswitch.node.evaluator"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1, env=env)
    try:
        proc.stdin.write(codec.encode(pb.EvaluatorConfig(script_path=str(script), batch_size=50, threads=1)) + "\n")
        for i, path in enumerate(paths):
            proc.stdin.write(codec.encode(pb.EvaluateRequest(path=path, fraction=(i + 1) / 8, time_s=i)) + "\n")
        proc.stdin.write(codec.encode(pb.EvaluateRequest(scorers=2)) + "\n")
        proc.stdin.close()
        scored, done = [], False
        for line in proc.stdout:
            event = codec.decode(line, pb.Event)
            kind = codec.kind(event)
            assert kind != "error", event
            if kind == "evaluation":
                scored.append(event.evaluation)
            done = done or kind == "evaluator_done"
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    assert done
    assert sorted(e.checkpoint for e in scored) == sorted(paths)  # each scored, once
    assert all(e.examples == 200 for e in scored)
    assert "scoring up to 2 checkpoints at once" in (tmp_path / "evaluator.log").read_text()
    assert (meet / "met").exists()  # two scorings were in progress at once
