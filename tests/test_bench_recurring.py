"""The recurring-job part's arithmetic: each later run against the same seed's BSP run."""

from bench import recurring


def run(variant, seed, acc, time_s, switched=()):
    return {"variant": variant, "seed": seed, "status": "completed", "final_accuracy": acc, "train_time_s": time_s,
            "switched_at": list(switched)}


def test_each_recurring_run_is_set_against_its_own_seeds_bsp_run():
    runs = [run("bsp", 11, 0.92, 20.0), run("recurring", 11, 0.93, 18.0, [0.41]),
            run("recurring", 12, 0.90, 9.0), run("bsp", 12, 0.91, 10.0),
            {"variant": "recurring", "seed": 13, "error": "no summary"}, run("bsp", 13, 0.95, 30.0)]
    table = recurring.summarize(runs)
    assert table["bsp"]["final_accuracy"]["median"] == 0.92 and table["recurring"]["train_time_s"]["n"] == 2
    assert table["recurring"]["time_vs_same_seed_bsp"]["runs"] == [0.9, 0.9]
    assert [round(p, 6) for p in table["recurring"]["points_vs_same_seed_bsp"]["runs"]] == [1.0, -1.0]
    assert table["recurring"]["switched"] == 1  # the failed run counts nowhere


def test_the_part_is_registered_with_its_options():
    import argparse

    from bench import parts

    assert parts.load("recurring") is recurring
    parser = argparse.ArgumentParser()
    recurring.add_options(parser)
    args = parser.parse_args([])
    assert args.job.endswith("tabular_mlp.yaml") and args.seeds == "11,12,13,14,15"
