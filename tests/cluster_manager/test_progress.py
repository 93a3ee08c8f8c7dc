"""The finished run's table: each phase's share of its time in its all-reduces."""

from syncswitch.cluster_manager.progress import collective_share, summary_table


def _phase(protocol: str, wall: float, measured: dict) -> dict:
    return {"protocol": protocol, "start_fraction": 0.0, "end_fraction": 1.0, "wall_time_s": wall,
            "examples_per_s": 400.0, "measured": measured}


def test_a_phase_counts_its_all_reduces_on_the_last_worker_to_pause():
    assert collective_share(_phase("bsp", 30.0, {"allreduce": True, "allreduce_s": 18.0})) == 0.6
    assert collective_share(_phase("local-sgd", 15.0, {"allreduce": True, "average_s": 8.6})) == 8.6 / 15.0
    # Local SGD through the parameter servers, and a protocol with no collective: no share.
    assert collective_share(_phase("local-sgd", 15.0, {"average_s": 8.6})) is None
    assert collective_share(_phase("asp", 15.0, {"staleness_mean": 3.0})) is None


def test_the_table_gives_each_phase_its_all_reduce_share_where_it_has_one():
    table = summary_table({"status": "completed", "run_dir": "runs/x", "schedule": [
        _phase("bsp", 30.0, {"allreduce": True, "allreduce_s": 18.0}), _phase("asp", 10.0, {"updates": 9})]})
    assert "phase bsp 0.00-1.00   30.0 s, 400 ex/s, all-reduce 60% of it" in table
    assert "phase asp 0.00-1.00   10.0 s, 400 ex/s\n" in table
