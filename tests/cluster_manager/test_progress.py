"""The finished run's table: each phase's share in its all-reduces, and the hint to compress them."""

from syncswitch.cluster_manager.progress import collective_share, compression_hint, summary_table


def _phase(protocol: str, wall: float, measured: dict) -> dict:
    return {"protocol": protocol, "start_fraction": 0.0, "end_fraction": 1.0, "wall_time_s": wall,
            "examples_per_s": 400.0, "measured": measured}


def _summary(phases, compression=None) -> dict:
    return {"status": "completed", "schedule": phases, "hyperparameters": {"compression": compression},
            "run_dir": "runs/x"}


def test_a_phase_counts_its_all_reduces_on_the_last_worker_to_pause():
    assert collective_share(_phase("bsp", 30.0, {"allreduce": True, "allreduce_s": 18.0})) == 0.6
    assert collective_share(_phase("local-sgd", 15.0, {"allreduce": True, "average_s": 8.6})) == 8.6 / 15.0
    # Local SGD through the parameter servers, and a protocol with no collective: no share.
    assert collective_share(_phase("local-sgd", 15.0, {"average_s": 8.6})) is None
    assert collective_share(_phase("asp", 15.0, {"staleness_mean": 3.0})) is None


def test_a_phase_spending_a_third_of_its_time_in_all_reduces_is_told_to_compress_them():
    slow = _phase("bsp", 30.0, {"allreduce": True, "allreduce_s": 18.0})
    hint = compression_hint(_summary([slow]))
    assert hint.startswith("bsp's all-reduces took 60% of its time") and "hyperparameters.compression: bf16" in hint
    table = summary_table(_summary([slow]))
    assert "all-reduce 60% of it" in table and "hint" in table
    assert compression_hint(_summary([slow], compression="fp16")) is None  # compressed already
    fast = _phase("bsp", 30.0, {"allreduce": True, "allreduce_s": 3.0})
    assert compression_hint(_summary([fast])) is None and "hint" not in summary_table(_summary([fast]))
    # The phase that spent the largest share names itself: local SGD's averages are all-reduces too.
    averages = _phase("local-sgd", 10.0, {"allreduce": True, "average_s": 9.0})
    assert compression_hint(_summary([slow, averages])).startswith("local-sgd's all-reduces took 90%")
