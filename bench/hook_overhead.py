"""Hook overhead: step throughput of the ASP update op in syncswitch's hooked loop over the same graph without hooks.

Runs one node (PS + worker servers in this process) and alternates blocks of steps with and without
the hooks, so machine noise hits both sides alike. Prints JSON with the ratio (target: >= 0.97).
"""

import argparse
import json
import os
import queue
import socket
import statistics
import sys
import time

from bench import common  # it sets the TensorFlow environment (legacy Keras, quiet logs)

ROOT = common.ROOT


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


RESULT_SCHEMA = {"hook_overhead_ratio": "median steps/s with hooks / plain session.run, over blocks",
                 "ratio_min": "worst block", "ratio_max": "best block",
                 "ratio_vs_callable": "median steps/s with hooks / a bare callable"}


def add_options(parser) -> None:
    parser.add_argument("--script", default=os.path.join(ROOT, "examples", "mnist1d_cnn.py"))
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)


def run_part(args, root) -> dict:
    """The measurement runs in a process of its own: its servers cannot be shut down in-process."""
    return common.run_json_script(["-m", "bench.hook_overhead", "--measure", "--script", args.script,
                                   "--blocks", str(args.blocks), "--steps", str(args.steps)], timeout_s=900)


def measure(argv) -> None:
    parser = argparse.ArgumentParser()
    add_options(parser)
    args = parser.parse_args(argv)

    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    task = _one_node_task(args.script)
    hooks = _task_hooks(task)
    with task.g.graph.as_default():
        sides = _sides(task, hooks)
        rates = _time_blocks(sides, args.blocks, args.steps)
    print(json.dumps(_summary(rates), indent=2))
    sys.stdout.flush()
    os._exit(0)  # servers cannot be shut down in-process


def _one_node_task(script: str):
    """A one-worker ASP task (PS and worker servers in this process) in the state a task trains ASP in."""
    from syncswitch.node.task import Task
    from syncswitch.wire import agent_pb2 as pb

    config = pb.PhaseConfig(protocol="asp", per_worker_batch=32, global_batch=32, learning_rate=0.01, momentum=0.9)
    launch = pb.Launch(task_index=0, num_workers=1, ps_hosts=[f"127.0.0.1:{free_port()}"],
                       worker_hosts=[f"127.0.0.1:{free_port()}"], script_path=script, params_json="{}",
                       workload=pb.Workload(samples=10**9), checkpoint_dir="/tmp/syncswitch-bench-ckpt",
                       phases=[pb.PhasePlan(protocol="asp", until=1.0, config=config, build=True)])
    task = Task(launch, queue.Queue())
    state = task.state
    state.protocol, state.phase, state.boundary = "asp", 0, 1.0
    state.stride = 32  # as the task sets it for ASP: one worker, batch 32
    return task


def _task_hooks(task):
    from syncswitch.node.hooks import BoundaryHook, DelayHook, DivergenceHook, HookList, MetricsHook

    g, state = task.g, task.state
    # The hooks a task runs (no evaluation checkpoints: the chief's only extra, once per 5%).
    return HookList([DivergenceHook(state, g.loss),
                     MetricsHook(state, g.loss, lambda e: None, batch_by_protocol={"asp": 32}),
                     DelayHook(state), BoundaryHook(state)])


def _sides(task, hooks) -> tuple:
    """The loops compared, each one step per call, after a warm-up step of each."""
    import tensorflow as tf

    from syncswitch.node.step_loop import StepRunner

    v1 = tf.compat.v1
    g = task.g
    hooks.begin()
    creator = v1.train.ChiefSessionCreator(scaffold=g.scaffold, master=task.worker_server.target,
                                           config=task.config)
    raw = creator.create_session()
    hooks.after_create_session(raw, None)
    runner = StepRunner(raw, hooks, task.state)
    engine = g.engines["asp"]
    train_op = engine.train_op
    runner.warm_up(engine)
    bare_callable = raw.make_callable(train_op)
    # The hooks' fetches without their Python: splits the overhead into TF and Python parts.
    fetch_callable = raw.make_callable([train_op, engine.samples_after, hooks.before_run(None).fetches])
    runner.step(engine)
    raw.run(train_op)
    bare_callable()
    # The syncswitch loop against a user's plain `session.run(train_op)` loop and against the
    # fastest hook-free loop TF offers (a callable), blocks interleaved so noise hits all alike.
    return (("session_run", lambda: raw.run(train_op)), ("callable", bare_callable),
            ("fetches_only", fetch_callable), ("with_hooks", lambda: runner.step(engine)))


def _time_blocks(sides, blocks: int, steps: int) -> dict:
    """Steps/s of each side per block, the sides taking turns within every block."""
    rates = {name: [] for name, _ in sides}
    for _ in range(blocks):
        for name, run in sides:
            t0 = time.perf_counter()
            for _ in range(steps):
                run()
            rates[name].append(steps / (time.perf_counter() - t0))
    return rates


def _summary(rates: dict) -> dict:
    ratios = [w / wo for w, wo in zip(rates["with_hooks"], rates["session_run"])]
    strict = [w / wo for w, wo in zip(rates["with_hooks"], rates["callable"])]
    return {"hook_overhead_ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "ratio_vs_callable": statistics.median(strict), "ratio_vs_callable_min": min(strict),
            "ratio_vs_callable_max": max(strict),
            "steps_per_s_with": statistics.median(rates["with_hooks"]),
            "steps_per_s_without": statistics.median(rates["session_run"]),
            "steps_per_s_callable": statistics.median(rates["callable"]),
            "steps_per_s_fetches_only": statistics.median(rates["fetches_only"])}


if __name__ == "__main__":
    from bench import parts

    if "--measure" in sys.argv:
        measure(sys.argv[1:])
    sys.exit(parts.main_of(__spec__.name))
