"""The peers comparison's arithmetic: time to accuracy from a peer's evaluations, ratios to MWMS and one process."""

from bench import peers


def test_time_to_accuracy_is_the_first_evaluation_at_the_target():
    assert peers.time_to({"evaluations": [[1.0, 0.5], [2.0, 0.96], [3.0, 0.97]]}, 0.95) == 2.0
    assert peers.time_to({"evaluations": [[1.0, 0.5]]}, 0.95) is None
    assert peers.time_to({"time_to_accuracy_s": 7.5, "evaluations": []}, 0.95) == 7.5  # syncswitch's own


def test_summary_gives_medians_and_ratios():
    runs = [{"variant": v, "seed": s, "train_time_s": t, "time_to_accuracy_s": t / 2, "final_accuracy": 0.97,
             "examples_per_s": 1000.0 / t} for v, base in (("single", 30.0), ("mwms", 28.0), ("bsp", 21.0))
            for s, t in ((1, base), (2, base + 2), (3, base - 2))]
    table = peers.summarize(runs)
    assert table["mwms"]["train_time_s"]["median"] == 28.0
    assert table["bsp"]["train_time_vs_mwms"] == 0.75
    assert table["single"]["train_time_vs_single"] == 1.0
    assert table["bsp"]["tta_vs_mwms"] == 0.75
