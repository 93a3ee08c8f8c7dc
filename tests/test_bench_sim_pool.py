"""The benches' watched simulation child: results come back, a stalled or dead child is replaced and its run retried."""

import os
import time

import pytest

from bench.sim_pool import RunStalled, SimPool


# Functions the child runs (importable by name in a fresh interpreter).
def stall_once(marker: str) -> str:
    """The first call hangs without writing anything (as the seen hang did); later calls answer."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(600)
    return "answered"


def die_once(marker: str) -> str:
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return "answered"


def slow_but_writing(folder: str, seconds: float) -> int:
    """Runs longer than the stall window, writing as it goes: progress, so never killed."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "metrics.jsonl"), "w") as fh:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            fh.write("x" * 100 + "\n")
            fh.flush()
            time.sleep(0.5)
    return os.getpid()


def fails(message: str):
    raise ValueError(message)


def child_pid(_: str) -> int:
    return os.getpid()


def test_a_stalled_run_is_killed_and_retried_in_a_fresh_child(tmp_path):
    with SimPool(stall_s=3, retries=1, threads=None, log=lambda _: None) as pool:
        began = time.monotonic()
        assert pool.call(f"{__name__}:stall_once", str(tmp_path / "run"), str(tmp_path / "marker")) == "answered"
        assert pool.restarts == 1
        assert time.monotonic() - began < 60


def test_a_child_that_dies_is_replaced(tmp_path):
    with SimPool(stall_s=60, retries=1, threads=None, log=lambda _: None) as pool:
        assert pool.call(f"{__name__}:die_once", str(tmp_path / "run"), str(tmp_path / "marker")) == "answered"
        assert pool.restarts == 1


def test_a_run_that_keeps_writing_is_not_killed(tmp_path):
    folder = str(tmp_path / "run")
    with SimPool(stall_s=2, retries=0, threads=None, log=lambda _: None) as pool:
        pool.call(f"{__name__}:slow_but_writing", folder, folder, 5.0)
        assert pool.restarts == 0


def test_every_try_stalled_gives_up_naming_the_folder(tmp_path):
    logged = []
    with SimPool(stall_s=2, retries=1, threads=None, log=logged.append) as pool:
        marker = tmp_path / "marker"
        with pytest.raises(RunStalled, match="run: no progress on 2 tries"):
            # the marker is removed before each try, so every try hangs
            pool.call(f"{__name__}:stall_always", str(tmp_path / "run"), str(marker))
    assert len(logged) == 2 and "giving up" in logged[-1]


def stall_always(marker: str) -> str:
    if os.path.exists(marker):
        os.remove(marker)
    return stall_once(marker)


def test_an_error_in_the_child_is_raised_with_its_traceback(tmp_path):
    with SimPool(stall_s=60, threads=None, log=lambda _: None) as pool:
        with pytest.raises(RuntimeError, match="ValueError: bad spec"):
            pool.call(f"{__name__}:fails", str(tmp_path), "bad spec")
        assert pool.call(f"{__name__}:child_pid", str(tmp_path), "x") != os.getpid()  # the child still serves


def test_the_child_is_replaced_after_its_runs(tmp_path):
    with SimPool(recycle=2, threads=None, log=lambda _: None) as pool:
        pids = [pool.call(f"{__name__}:child_pid", str(tmp_path), "x") for _ in range(3)]
    assert pids[0] == pids[1] != pids[2] and pool.restarts == 0


def test_a_simulated_run_in_the_child_is_the_run_in_this_process(digits_job, tmp_path):
    """The child runs the bench's own code on its own data: the same run as here, same evaluations (on this MLP one
    TensorFlow thread rounds as the default pools do; a convolution's rounding can differ)."""
    import json

    from bench.scale import run_one

    args = (digits_job, "asp", 2, 3, "speeds:0.2")
    here = run_one(*args, str(tmp_path / "here"))
    with SimPool(log=lambda _: None) as pool:
        there = pool.call("bench.scale:run_one", str(tmp_path / "there"), *args, str(tmp_path / "there"))
    assert there["final_accuracy"] == here["final_accuracy"] and there["measured"] == here["measured"]
    evaluations = [[(e["fraction"], e["accuracy"], e["loss"]) for e in json.load(open(tmp_path / d / "summary.json"))
                    ["evaluations"]] for d in ("here", "there")]
    assert evaluations[0] == evaluations[1] and len(evaluations[0]) == 4
