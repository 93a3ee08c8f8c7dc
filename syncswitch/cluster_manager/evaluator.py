"""The evaluator process: test-split accuracy of each checkpoint it is sent, plus the paper's accuracy statistics.

Run as `python -m syncswitch.cluster_manager.evaluator`: the first stdin line is its configuration,
each later line a checkpoint `{path, fraction, time_s}`; each result is one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time


def time_to_accuracy(evaluations: list[dict], target: float | None):
    """Seconds of training until the test accuracy first reached `target` (None if never)."""
    if target is None:
        return None
    for ev in evaluations:
        if ev["accuracy"] >= target:
            return ev["time_s"]
    return None


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.nice(int(os.environ.get("SYNCSWITCH_NICE", "0")))  # set here: no preexec_fn fork beside gRPC threads
    config = json.loads(sys.stdin.readline())
    import tensorflow as tf

    from syncswitch.errors import SyncSwitchError
    from syncswitch.hooks import script as scriptmod

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    path, params = config["script_path"], config["params"]
    try:
        module = scriptmod.load_script(path)
        graph = tf.Graph()
        with graph.as_default():
            ds = scriptmod.call_input_fn(module, path, "test", config["batch_size"], params)
            iterator = v1.data.make_initializable_iterator(ds)
            features, labels = iterator.get_next()
            out = scriptmod.call_model_fn(module, path, features, labels, params, False)
            logits = out["logits"]
            if labels.shape.rank == 2:  # one-hot labels
                labels = tf.argmax(labels, axis=1)
            predictions = tf.argmax(logits, axis=1, output_type=tf.int64)
            correct = tf.reduce_sum(tf.cast(tf.equal(predictions, tf.cast(labels, tf.int64)), tf.int64))
            count = tf.shape(logits, out_type=tf.int64)[0]
            loss = out["loss"]
            saver = v1.train.Saver(var_list=v1.global_variables())
        threads = config.get("threads", 1)
        session = v1.Session(graph=graph, config=v1.ConfigProto(
            intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads))
    except SyncSwitchError as exc:
        _emit({"event": "error", "message": str(exc)})
        return
    _emit({"event": "evaluator_ready"})
    for line in sys.stdin:
        job = json.loads(line)
        started = time.time()
        try:
            saver.restore(session, job["path"])
        except Exception as exc:  # noqa: BLE001 - a missing or partial checkpoint is reported, not fatal
            _emit({"event": "error", "message": f"cannot restore {job['path']}: {type(exc).__name__}"})
            continue
        session.run(iterator.initializer)
        hits = total = 0
        loss_sum = 0.0
        while True:
            try:
                c, n, l = session.run([correct, count, loss])
            except tf.errors.OutOfRangeError:
                break
            hits, total, loss_sum = hits + int(c), total + int(n), loss_sum + float(l) * int(n)
        _emit({"event": "evaluation", "fraction": job["fraction"], "time_s": job["time_s"],
               "checkpoint": job["path"], "accuracy": hits / max(total, 1), "loss": loss_sum / max(total, 1),
               "examples": total, "eval_s": time.time() - started})
    _emit({"event": "evaluator_done"})


if __name__ == "__main__":
    main()
