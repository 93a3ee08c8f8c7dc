"""The evaluator process: test-split accuracy of each checkpoint it is sent.

Run as `python -m syncswitch.node.evaluator`: the first stdin line is its EvaluatorConfig, each later
line an EvaluateRequest, scored newest first (`eval_queue`); each result is one Event line on stdout
(syncswitch/wire).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
import traceback


# The event stream; main() moves it off fd 1, as a training task does: what the user's script prints (a dataset's
# generator, on every evaluation) must not corrupt or swallow an event line.
_EVENTS = sys.stdout
_EMITTING = threading.Lock()  # several scorers may report at once (training has ended)


def _idle_priority() -> None:
    """Run at the idle scheduling class where the OS has one: the evaluations then take only CPU that training
    leaves idle. A nice level still gives them a weighted share of a busy core, and the workers of a synchronous
    step wait for the slowest of them. Called before the session makes its thread pools, which inherit the class;
    an unprivileged process may enter it (never leave it)."""
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass  # not permitted here (a container's seccomp rule): the nice level alone then


def _emit(**member) -> None:
    from syncswitch.wire import codec

    line = codec.encode(codec.event(**member)) + "\n"
    with _EMITTING:
        _EVENTS.write(line)
        _EVENTS.flush()


@dataclasses.dataclass
class _Scorer:
    """The test split and the model in one graph: what scoring a checkpoint runs."""

    session: object
    saver: object
    iterator: object
    feeds: dict     # the test split's large arrays, fed at each start of the iterator (node/array_feeds.py)
    fetches: list  # [correct predictions, examples, mean loss] of one batch


def _build(config, tf) -> _Scorer:
    """The user's test split and model in a session of `config.threads` threads; raises what the script
    raises."""
    from syncswitch.node import scoring
    from syncswitch.node import script as scriptmod

    v1 = tf.compat.v1
    path, params = config.script_path, json.loads(config.params_json or "{}")
    os.chdir(os.path.dirname(os.path.abspath(path)))  # as the training tasks: the script's relative paths hold
    module = scriptmod.load_script(path)
    graph = tf.Graph()
    threads = config.threads or 1
    # Thread pools of its own: by default a process's sessions share one inter-op pool, sized by the first, so the
    # extra scorers' ops would queue behind the first scorer's on its one thread (measured on the synthetic ResNet,
    # 2 cores: two scorers took 0.87x one scorer's time for a backlog of 10 checkpoints, with pools of their own 0.63x).
    session = v1.Session(graph=graph, config=v1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads, use_per_session_threads=True))
    with graph.as_default():
        feeds: dict = {}
        ds = scriptmod.call_input_fn(module, path, "test", config.batch_size, params, feeds)
        cardinality = session.run(tf.data.experimental.cardinality(ds), feed_dict=feeds or None)
        if cardinality == tf.data.experimental.INFINITE_CARDINALITY:
            ds = scriptmod.finite_test_set(ds, module, path, params, config.batch_size)
        iterator = v1.data.make_initializable_iterator(ds)
        features, labels = iterator.get_next()
        out = scriptmod.call_model_fn(module, path, features, labels, params, False)
        logits = out["logits"]
        fetches = [scoring.correct_count(logits, labels), tf.shape(logits, out_type=tf.int64)[0], out["loss"]]
        saver = v1.train.Saver(var_list=v1.global_variables())
        # A script's lookup tables (a vocabulary in input_fn) and local variables are not in checkpoints.
        local_init = v1.group(v1.tables_initializer(), v1.local_variables_initializer())
    session.run(local_init)
    return _Scorer(session, saver, iterator, feeds, fetches)


def _score(scorer: _Scorer, tf) -> tuple[int, int, float]:
    """(correct, examples, summed loss) over the whole test split, with the restored weights."""
    scorer.session.run(scorer.iterator.initializer, feed_dict=scorer.feeds or None)
    hits = total = 0
    loss_sum = 0.0
    while True:
        try:
            c, n, batch_loss = scorer.session.run(scorer.fetches)
        except tf.errors.OutOfRangeError:
            return hits, total, loss_sum
        hits, total, loss_sum = hits + int(c), total + int(n), loss_sum + float(batch_loss) * int(n)


class _Scorers:
    """Scores the queue's checkpoints, newest first, until stdin closes: with one scorer while training runs (one
    thread at the idle class, beside the nodes), with more once the manager says training has ended and asks for
    them (`widen`): each extra one builds its own model and session (a restore writes the scorer's variables) and
    takes the next checkpoint; each scoring stays one thread, as the first one's."""

    def __init__(self, first: _Scorer, config, tf, pb):
        from syncswitch.node.eval_queue import RequestQueue

        self.config, self.tf, self.pb = config, tf, pb
        self.first = first
        self.count = 1
        self.threads: list[threading.Thread] = []
        self.failed = False
        self._lock = threading.Lock()
        self.queue = RequestQueue(sys.stdin, on_scorers=self.widen)  # last: its reader may call widen at once

    def widen(self, scorers: int, waiting: int) -> None:
        """Score up to `scorers` at once; extra scorers only for what waits (building one costs a second)."""
        with self._lock:
            extra = min(scorers - self.count, waiting)
            if extra <= 0 or self.failed:
                return
            self.count += extra
            print(f"training has ended: scoring up to {self.count} checkpoints at once", file=sys.stderr, flush=True)
            for _ in range(extra):
                thread = threading.Thread(target=self._extra, name="eval-scorer", daemon=True)
                thread.start()
                self.threads.append(thread)

    def _extra(self) -> None:
        try:
            scorer = _build(self.config, self.tf)
        except Exception:  # noqa: BLE001 - the first scorer carries on alone; the log says why
            traceback.print_exc()
            return
        self.serve(scorer)

    def serve(self, scorer: _Scorer) -> None:
        """Score with `scorer` until the input ends and nothing is left (or the test split proved empty)."""
        tf, pb = self.tf, self.pb
        while not self.failed and (job := self.queue.next()) is not None:
            started = time.time()
            try:
                scorer.saver.restore(scorer.session, job.path)
            except Exception as exc:  # noqa: BLE001 - a missing or partial checkpoint is reported, not fatal
                from syncswitch.errors import one_line

                _emit(error=pb.TaskError(message=f"cannot restore {job.path}: {one_line(exc)}"))
                continue
            hits, total, loss_sum = _score(scorer, tf)
            if total == 0:  # scored as 0.0 it would read as a model that learned nothing, and the guard would act
                self.failed = True
                _emit(error=pb.TaskError(message=f"script {self.config.script_path}: input_fn('test', ...) yielded "
                                                 "no examples", kind=pb.ERROR_KIND_SCRIPT))
                return
            _emit(evaluation=pb.Evaluation(fraction=job.fraction, time_s=job.time_s, checkpoint=job.path,
                                           accuracy=hits / max(total, 1), loss=loss_sum / max(total, 1),
                                           examples=total, eval_s=time.time() - started))

    def run(self) -> None:
        self.serve(self.first)
        with self._lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join()
        if not self.failed:
            _emit(evaluator_done=self.pb.EvaluatorDone())


def main() -> None:
    from syncswitch.node import startup

    global _EVENTS
    _EVENTS = startup.take_stdout()
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from syncswitch.wire import agent_pb2 as pb
    from syncswitch.wire import codec

    config = codec.decode(sys.stdin.readline(), pb.EvaluatorConfig)
    import tensorflow as tf

    from syncswitch.errors import SyncSwitchError, one_line

    # The import ran at the nodes' priority, so the evaluator is ready when they are (an unprivileged process
    # cannot raise its priority again); the evaluations, which overlap training, run niced. Set here, not
    # in a preexec_fn: no fork beside gRPC threads.
    os.nice(int(os.environ.get("SYNCSWITCH_NICE", "0")))
    if os.environ.get("SYNCSWITCH_IDLE") == "1":
        _idle_priority()
    tf.compat.v1.disable_eager_execution()
    path = config.script_path
    try:
        scorer = _build(config, tf)
    except SyncSwitchError as exc:
        _emit(error=pb.TaskError(message=str(exc), kind=pb.ERROR_KIND_SCRIPT))
        return
    except Exception as exc:  # noqa: BLE001 - the script's test split or model failed to build or initialize
        traceback.print_exc()
        _emit(error=pb.TaskError(message=f"script {path}: the evaluator could not set up the test split and model: "
                                         f"{one_line(exc)}", kind=pb.ERROR_KIND_SCRIPT))
        return
    _emit(evaluator_ready=pb.EvaluatorReady())
    _Scorers(scorer, config, tf, pb).run()


if __name__ == "__main__":
    main()
