"""The speed rules on throughputs real runs reported (metrics.jsonl `examples_per_s`, per worker, in order)."""

import pytest

from syncswitch.errors import SpecError
from syncswitch.policies import SWITCH_SPEEDS
from syncswitch.policies.speed import (BACK, KEEP, MEASURE, STAY, SWITCH, TRIAL, IgnoreSpeed, KnownSpeed,
                                       MeasuredSpeed, RunCosts, SpeedSettings)

# Nodes at 0.4 CPU, BSP's step not known: a pause of 0.2 / 0.4 = 0.5 s (its CPU share alone).
HALF_SECOND_PAUSE = RunCosts(cpus_per_node=0.4)

# memory_gru-2 seed 2, 2026-11-26 (BSP by all-reduce, then ASP through the parameter servers at 0.49): each worker's
# last 11 BSP reports before the switch and its first 5 ASP reports (a report every half second then). The run took
# 2.2x the same seed's BSP run.
GRU_BSP = {0: [2414, 2631, 2641, 2175, 2573, 3029, 2522, 2622, 2543, 2637, 2713],
           1: [2678, 2214, 2330, 2575, 2019, 2550, 3107, 2274, 2671, 2534, 2314]}
GRU_ASP = {0: [614, 1015, 1070, 1395, 896], 1: [908, 809, 785, 617, 865]}
# plain_cnn-2 seed 0, 2026-11-26 (BSP through the parameter servers, then lookahead at 0.52): lookahead was faster.
CNN_BSP = {0: [1729, 1924, 2098, 1847, 1793, 1701, 1703, 1302, 1913, 1767, 2095],
           1: [1291, 1515, 1321, 1552, 1047, 1590, 1172, 1167, 776, 1840, 1439]}
CNN_LOOKAHEAD = {0: [2495, 3170, 2879, 3410, 3058], 1: [3548, 2644, 2902, 3321, 3274]}
# quickstart-2 seed 2, 2026-11-26 (`bench tta`, BSP by all-reduce, then lookahead at 0.25): BSP's reports before the
# switch (a 0 where a worker had not stepped) and lookahead's two; the run's trial went back at 0.51x.
QUICKSTART_BSP = {0: [0, 6164, 4027, 6504, 6782], 1: [0, 6231, 3087, 6652, 6815]}
QUICKSTART_LOOKAHEAD = {0: [3617, 2564], 1: [3414, 3697]}
# MNIST-1D CNN (jobs/mnist1d_cnn.yaml), 4 workers, BSP by all-reduce then local-sgd at 0.25, 2026-11-26 (d2e6515,
# `bench peers` default variant): each worker's last 11 BSP reports and its first local-sgd reports. Seed 3 kept
# local-sgd at 1.15x after two reports and ran at 1.2-1.3x from its third on (its 4th-5th reports dip: the
# evaluator's held backlog, released when the target was kept); seeds 1 and 5 went back after two reports at 1.02x
# and 0.98x.
MNIST_BSP = {0: [2280, 2436, 1848, 2120, 2195, 2161, 2198, 2061, 2140, 2288, 2150],
             1: [2261, 2405, 1531, 2169, 2193, 2150, 2179, 2112, 2122, 2243, 2222],
             2: [2302, 2434, 1578, 2207, 2259, 2184, 2157, 2073, 2076, 2235, 2272],
             3: [2245, 2371, 1583, 2126, 2270, 2148, 2137, 2059, 2072, 2287, 2239]}
MNIST_LOCAL_SGD = {0: [2313, 2604, 2349, 2477, 2740, 2740, 2763, 2773, 2855, 2781],
                   1: [2352, 2430, 2737, 2175, 1962, 2751, 2654, 2785, 2648, 2848],
                   2: [2414, 2637, 2646, 2219, 1979, 2745, 2822, 2719, 2789, 2895],
                   3: [2109, 2437, 2649, 2177, 1887, 2763, 2806, 2654, 2707, 2848]}
MNIST_BSP_S1 = {0: [2105, 2109, 1827, 2269, 2047, 2181, 1970, 2154, 1981, 2088, 1917],
                1: [2079, 2148, 1574, 2230, 2093, 2133, 2004, 2125, 1907, 2049, 1904],
                2: [2092, 2093, 1622, 2271, 2115, 2166, 1992, 2138, 1937, 2128, 1953],
                3: [2094, 2066, 1617, 2184, 2045, 2191, 1984, 2142, 1897, 2119, 1959]}
MNIST_LOCAL_SGD_S1 = {0: [2257, 2282], 1: [2065, 2276], 2: [1997, 2150], 3: [1783, 2068]}
MNIST_BSP_S5 = {0: [1957, 2175, 1926, 2128, 2097, 2001, 1966, 1896, 1801, 1980, 1861],
                1: [1952, 2123, 1594, 2118, 2089, 2061, 1958, 1950, 1821, 1976, 1868],
                2: [1926, 2131, 1575, 2066, 2060, 2071, 1914, 1976, 1782, 1997, 1861],
                3: [1962, 2100, 1570, 2066, 2024, 2101, 2006, 1981, 1797, 1978, 1956]}
MNIST_LOCAL_SGD_S5 = {0: [1729, 1902], 1: [1178, 1916], 2: [2051, 2343], 3: [2045, 2330]}
# The same job at 40dad81 (`bench peers`, 5 seeds, notebook 2026-11-26-switch-timing-5): seeds 1 and 5 went back
# after two reports a worker at 0.80x and 0.92x, their first windows reading 0.72x and 0.85x (the kept seeds' local-sgd
# ran at 1.13-1.22x): each worker's last 11 BSP reports and its two local-sgd reports.
MNIST_BSP_B1 = {0: [2278, 2216, 2134, 1777, 2177, 1968, 2237, 2162, 2307, 2208, 2163],
                1: [2316, 2203, 2088, 1479, 2179, 1971, 2244, 2229, 2272, 2236, 2165],
                2: [2266, 2191, 2114, 1511, 2195, 1997, 2252, 2211, 2318, 2274, 2241],
                3: [2270, 2198, 2112, 1497, 2180, 1987, 2231, 2200, 2336, 2269, 2199]}
MNIST_LOCAL_SGD_B1 = {0: [1598, 1740], 1: [1710, 2122], 2: [1427, 1923], 3: [1590, 2018]}
MNIST_BSP_B5 = {0: [2027, 2088, 1961, 2075, 2010, 2144, 2125, 2038, 2019, 2128, 2165],
                1: [2023, 2095, 1556, 2074, 1986, 2123, 2066, 1971, 2014, 2091, 2164],
                2: [2008, 2159, 1538, 2045, 2021, 2111, 2050, 2029, 1990, 2062, 2119],
                3: [2054, 2132, 1574, 2058, 2045, 2146, 2103, 2047, 2050, 2175, 2292]}
MNIST_LOCAL_SGD_B5 = {0: [1735, 1830], 1: [1589, 2019], 2: [1432, 1845], 3: [2268, 2419]}


def _feed(rule, kind, reports, upto=None):
    for i in range(max(len(r) for r in reports.values()) if upto is None else upto):
        for worker, series in reports.items():
            if i < len(series):
                rule.on_rate(kind, worker, series[i])


def _trial(rule, bsp, target, target_name, measuring=None):
    """Feed BSP's reports, decide the switch, then feed the target's one round at a time: the first decision other
    than measuring on (those go to `measuring`, a list, where given)."""
    _feed(rule, "bsp", bsp)
    assert rule.before_switch(0.5, target_name).action == TRIAL
    rule.start_trial()
    for i in range(len(target[0])):
        for worker, series in target.items():
            rule.on_rate("target", worker, series[i])
            decision = rule.after_trial(0.5 + 0.01 * i, target_name)
            if decision is not None and decision.action == MEASURE and measuring is not None:
                measuring.append(decision)
            elif decision is not None:
                return decision, i
    return None, None


def test_a_trial_of_a_slower_target_goes_back():
    rule = MeasuredSpeed()
    decision, at = _trial(rule, GRU_BSP, GRU_ASP, "asp")
    assert decision.action == BACK and at == 1  # two reports of each worker, the first left out of the measure
    values = decision.values
    # BSP: each worker's median of its last 10 reports (2626.5 + 2432); ASP: its second report (1015 + 809)
    assert values["bsp_examples_per_s"] == pytest.approx(2626.5 + 2432)
    assert values["target_examples_per_s"] == pytest.approx(1015 + 809)
    assert values["ratio"] == pytest.approx(1824 / 5058.5)
    assert (values["reports"], values["reports_used"]) == (2, 1)
    # The band over the one report used: 2 standard errors of a report's 10% noise floor and BSP's 6.7% over 10.
    assert rule.bsp_scatter == (pytest.approx(0.0666, abs=1e-4), 10)
    assert values["band"] == pytest.approx(2 * (0.1 ** 2 + 0.0666 ** 2 / 10) ** 0.5, abs=1e-3)
    assert decision.reason == "asp measured 0.36x BSP's throughput on this job; a switch needs 1.1x"


def test_a_trial_of_a_faster_target_keeps_it():
    decision, _ = _trial(MeasuredSpeed(), CNN_BSP, CNN_LOOKAHEAD, "lookahead")
    assert decision.action == KEEP and decision.values["ratio"] > 1.5


def test_a_trial_waits_for_enough_reports():
    rule = MeasuredSpeed(SpeedSettings(trial_reports=5))
    _feed(rule, "bsp", GRU_BSP)
    rule.before_switch(0.5, "asp")
    _feed(rule, "target", GRU_ASP, upto=4)
    assert rule.after_trial(0.55, "asp") is None
    _feed(rule, "target", {0: GRU_ASP[0][4:], 1: GRU_ASP[1][4:]})
    assert rule.after_trial(0.56, "asp").action == BACK


def test_a_worker_with_no_target_report_is_waited_for():
    rule = MeasuredSpeed()
    _feed(rule, "bsp", GRU_BSP)
    rule.before_switch(0.5, "asp")
    for value in GRU_ASP[0]:
        rule.on_rate("target", 0, value)
    assert rule.rate("target") == (pytest.approx(1015), 5)
    rule.on_rate("target", 1, 0.0)  # a worker that has not stepped reports nothing usable
    assert rule.after_trial(0.55, "asp") is None  # its share of the target's throughput is not known yet
    for value in GRU_ASP[1]:
        rule.on_rate("target", 1, value)
    assert rule.after_trial(0.56, "asp").action == BACK


def test_a_margin_is_asked_of_the_target():
    settings = SpeedSettings(margin=2.5)
    decision, _ = _trial(MeasuredSpeed(settings), CNN_BSP, CNN_LOOKAHEAD, "lookahead")
    assert decision.action == BACK and "a switch needs 2.5x" in decision.reason


def test_a_trial_within_the_noise_of_the_bar_measures_on_until_it_is_clear():
    # MNIST-1D seed 3: after two reports a worker local-sgd reads 1.17x over the second (the first, a phase warming
    # up, left out), within the +-21% noise of one report around the 1.1x bar: the trial measures on and keeps it at
    # its cap, where it reads 1.23x.
    measuring = []
    decision, at = _trial(MeasuredSpeed(), MNIST_BSP, MNIST_LOCAL_SGD, "local-sgd", measuring)
    first = measuring[0].values
    assert (first["reports"], first["reports_used"]) == (2, 1) and first["ratio"] == pytest.approx(1.17, abs=0.01)
    assert measuring[0].reason.startswith("local-sgd measured 1.17x BSP's throughput on this job over 1 of 2 reports")
    assert measuring[0].reason.endswith("(+-21%) of the 1.1x a switch needs: measuring on")
    assert [d.values["reports_used"] for d in measuring[::4]] == [1, 2, 3, 4, 5, 6]  # the band shrinks with them
    assert measuring[-1].values["band"] < 0.11
    assert decision.action == KEEP and decision.values["ratio"] == pytest.approx(1.23, abs=0.01)
    assert (decision.values["reports"], decision.values["reports_used"]) == (8, 7) and at == 7


@pytest.mark.parametrize("bsp, target, one_shot_ratio", [
    (MNIST_BSP_S1, MNIST_LOCAL_SGD_S1, 1.02), (MNIST_BSP_S5, MNIST_LOCAL_SGD_S5, 0.98),
    (MNIST_BSP_B5, MNIST_LOCAL_SGD_B5, 0.91)])
def test_a_short_trial_that_sent_a_faster_target_back_now_measures_on(bsp, target, one_shot_ratio):
    # MNIST-1D runs that went back after two reports (the kept runs' local-sgd: 1.13-1.3x), where both windows
    # counted they read `one_shot_ratio`. Over each worker's second window they read 1.06x, 1.07x and 0.98x, within
    # the noise of one report of the bar: the trial measures on (the last went back before its first was left out).
    one_shot = MeasuredSpeed(SpeedSettings(trial_max_reports=2))
    decision = _trial(one_shot, bsp, target, "local-sgd")[0]
    assert decision.action == BACK and decision.values["reports_used"] == 1
    measuring = []
    assert _trial(MeasuredSpeed(), bsp, target, "local-sgd", measuring) == (None, None)
    assert [d.action for d in measuring] == [MEASURE]  # every worker's second report in: still within the noise
    assert measuring[0].values["ratio"] > one_shot_ratio


def test_a_second_window_below_the_noise_still_goes_back():
    # MNIST-1D seed 1 at 40dad81: its first window read 0.72x, its second 0.89x: the bar is outside the noise of
    # that one report (0.89 x 1.21 < 1.1), so the trial goes back after two reports, as it did.
    decision, at = _trial(MeasuredSpeed(), MNIST_BSP_B1, MNIST_LOCAL_SGD_B1, "local-sgd")
    assert decision.action == BACK and at == 1 and decision.values["ratio"] == pytest.approx(0.89, abs=0.01)


def test_a_slower_target_goes_back_after_two_reports_without_its_first_window():
    # quickstart-2's lookahead: its second window reads 0.48x BSP (both windows counted: 0.51x).
    decision, at = _trial(MeasuredSpeed(), QUICKSTART_BSP, QUICKSTART_LOOKAHEAD, "lookahead")
    assert decision.action == BACK and at == 1 and decision.values["ratio"] == pytest.approx(0.476, abs=0.005)


def test_a_trial_that_stays_within_the_noise_decides_at_its_cap():
    bsp = {0: [1000.0] * 11, 1: [1000.0] * 11}
    target = {0: [1180.0, 980.0] * 5, 1: [980.0, 1180.0] * 5}  # 1.08x BSP, each report 10% off
    measuring = []
    decision, at = _trial(MeasuredSpeed(), bsp, target, "asp", measuring)
    assert decision.action == BACK and decision.values["reports"] == 8 and at == 7
    assert decision.values["ratio"] == pytest.approx(1.08)
    assert sorted({d.values["reports"] for d in measuring}) == [2, 3, 4, 5, 6, 7]
    decision, at = _trial(MeasuredSpeed(SpeedSettings(trial_max_reports=4)), bsp, target, "asp", [])
    assert decision.action == BACK and at == 3
    # A first window that reads low, then 1.08x: leaving it out does not lift a target below the bar over it.
    target = {0: [800.0] + [1180.0, 980.0] * 4, 1: [800.0] + [980.0, 1180.0] * 4}
    decision, at = _trial(MeasuredSpeed(), bsp, target, "asp", [])
    assert decision.action == BACK and decision.values["reports_used"] == 7
    assert decision.values["ratio"] == pytest.approx(1.08)


def test_earlier_runs_decide_without_a_trial():
    slow = MeasuredSpeed(known=(KnownSpeed("asp", 0.55, runs=4),))
    _feed(slow, "bsp", GRU_BSP)
    decision = slow.before_switch(0.45, "asp")
    assert decision.action == STAY
    assert decision.reason == "asp measured 0.55x BSP's throughput on this job (earlier runs); a switch needs 1.1x"
    assert decision.values["target_examples_per_s"] == pytest.approx(0.55 * 5058.5)
    assert decision.values["source"] == "earlier runs (4)"
    fast = MeasuredSpeed(known=(KnownSpeed("lookahead", 1.9),))
    assert fast.before_switch(0.45, "lookahead").action == SWITCH
    assert fast.before_switch(0.45, "asp").action == TRIAL  # measured for another target only


def test_a_switch_must_win_back_its_pause_in_the_work_left():
    # BSP at 5058.5 ex/s: 50,585 samples left are 10 s of BSP. A 0.5 s pause is won back at 1/(1 - 0.05) = 1.053x,
    # under the noise floor (1.1x); on 1 s left it needs 2x; on 0.4 s left no speed wins it back.
    def decide(ratio, samples_left):
        rule = MeasuredSpeed(known=(KnownSpeed("local-sgd", ratio, runs=3),), costs=HALF_SECOND_PAUSE)
        _feed(rule, "bsp", GRU_BSP)
        return rule.before_switch(0.5, "local-sgd", samples_left)

    assert decide(1.15, 50585).action == SWITCH
    assert decide(1.05, 50585).action == STAY
    short = decide(1.9, 5058.5)
    assert short.action == STAY and short.values["margin"] == pytest.approx(2.0)
    assert short.values["pause_s"] == 0.5 and short.values["bsp_time_left_s"] == pytest.approx(1.0)
    assert short.values["pause_source"] == "cpu budget and step" and short.values["cpus_per_node"] == 0.4
    assert short.reason.endswith("a switch needs 2x to win back its 0.50 s pause in the 1.0 s BSP has left")
    assert decide(2.1, 5058.5).action == SWITCH
    assert decide(50.0, 2023.4).reason.endswith("its 0.50 s pause is more than the 0.40 s BSP has left")
    unknown = MeasuredSpeed(costs=HALF_SECOND_PAUSE)
    _feed(unknown, "bsp", GRU_BSP)
    assert unknown.before_switch(0.9, "asp", 5058.5 * 30).action == TRIAL  # 30 s left: a trial can pay (below)
    assert unknown.before_switch(0.99, "asp", 2023.4).action == STAY  # not even a trial can pay


def test_the_pause_before_the_first_switch_follows_the_nodes_budget_and_bsps_step():
    # 0.2 CPU-s of control over the nodes' budget, and four of BSP's steps (global batch over its examples/s).
    def pause(costs, bsp=5058.5, mode="in-place"):
        return MeasuredSpeed(costs=costs, mode=mode).pause(bsp)

    assert pause(RunCosts()) == (pytest.approx(0.2), "cpu budget and step")  # unbudgeted, step unknown
    assert pause(RunCosts(cpus_per_node=4.0))[0] == pytest.approx(0.2)  # a budget above a core does not shorten it
    # ResNet (4 workers, batch 128) at 0.4 CPU a node, BSP at 509.4 ex/s: 0.5 + 4 x 0.251 = 1.51 s (its two pauses
    # measured 1.83 and 1.42 s; the 0.5 s assumed before made the trial look cheap).
    resnet = RunCosts(global_batch=128, cpus_per_node=0.4)
    assert pause(resnet, 509.4) == (pytest.approx(0.5 + 4 * 128 / 509.4), "cpu budget and step")
    # MNIST-1D (batch 128) unbudgeted at 7922.9 ex/s: 0.2 + 4 x 0.016 = 0.26 s (its pauses: 0.20-0.41 s).
    assert pause(RunCosts(global_batch=128), 7922.9)[0] == pytest.approx(0.2 + 4 * 128 / 7922.9)
    assert pause(RunCosts(global_batch=128, stored_pause_s=0.9), 7922.9) == (0.9, "earlier runs")
    assert pause(resnet, 509.4, mode="relaunch") == (2.5, "assumed")
    assert pause(RunCosts(stored_pause_s=3.1), mode="relaunch") == (3.1, "earlier runs")
    measured = MeasuredSpeed(costs=resnet)
    measured.on_pause(0.7)
    assert measured.pause(509.4) == (0.7, "this run")  # the run's own pause wins over every prior


def test_a_trial_lasts_its_reports_at_bsps_step_or_the_report_interval():
    # Reports come every 20 steps or every half second, whichever is first, for (2 + 8) / 2 = 5 reports, after the
    # phase's first step.
    rule = MeasuredSpeed(costs=RunCosts(global_batch=128))
    assert rule.trial_length(7922.9) == pytest.approx(128 / 7922.9 * (1 + 20 * 5))  # MNIST-1D: 0.0162 s steps
    assert rule.trial_length(509.4) == pytest.approx(128 / 509.4 + 0.5 * 5)  # ResNet: 20 steps would take 5 s
    assert MeasuredSpeed(SpeedSettings(trial_reports=4), costs=RunCosts(global_batch=128)).trial_length(
        509.4) == pytest.approx(128 / 509.4 + 0.5 * 6)
    assert MeasuredSpeed().trial_length(509.4) == pytest.approx(2.5)  # no global batch: the interval's pace


def test_a_target_is_tried_only_where_a_kept_one_would_pay_for_a_failed_trial():
    # A trial that goes back is rolled back: it costs two pauses and its whole length; a target kept at the hoped
    # 1.25x wins a fifth of the T seconds BSP has left, less the switch's pause. BSP at 5058.5 ex/s with no global
    # batch: 0.5 s pauses, a 2.5 s trial (five half-second reports), 3.5 s lost.
    def decide(seconds_left, mode="in-place", measured_pause=None, costs=HALF_SECOND_PAUSE):
        rule = MeasuredSpeed(mode=mode, costs=costs)
        _feed(rule, "bsp", GRU_BSP)
        if measured_pause is not None:
            rule.on_pause(measured_pause)
        return rule.before_switch(0.25, "local-sgd", 5058.5 * seconds_left)

    assert decide(21).action == TRIAL  # 21 x 0.2 - 0.5 = 3.7 s won against 3.5 s lost
    short = decide(15)  # 2.5 s against 3.5 s: the old rule (0.5 s for the trial) tried here
    assert short.action == STAY and short.values["source"] == "work left"
    assert short.values["failed_trial_s"] == pytest.approx(3.5) and short.values["hoped_gain_s"] == pytest.approx(2.5)
    assert short.values["trial_s"] == pytest.approx(2.5)
    assert short.reason == ("not trying local-sgd: a trial that goes back would cost 3.5 s (two 0.50 s pauses and "
                            "the 2.5 s trial), more than a 1.25x target would win back (2.5 s) in the 15.0 s BSP has "
                            "left")
    assert decide(45, "relaunch").action == STAY  # two 2.5 s relaunches and the trial: 7.5 s lost against 6.5 s won
    assert decide(45, "relaunch").values["pause_s"] == 2.5
    assert decide(60, "relaunch").action == TRIAL  # 9.5 s won
    assert decide(16, measured_pause=0.15).action == TRIAL  # the run's own pause: 3.05 s won against 2.8 s lost
    assert MeasuredSpeed(SpeedSettings(margin=1.1)).worth_trying(5058.5, 5058.5) == (True, {})  # a fixed margin


def test_a_short_bsp_phase_is_weighed_by_its_first_window_or_in_steps():
    # bench/probes/functions_mlp.yaml on 4 workers (2026-11-28): 66 steps of 128; the switch rule switched at step 21,
    # when no worker had a report past its first, so BSP's speed was unknown and the rule tried local-sgd whatever the
    # work left. The trial's phase (43 steps) ended before its second report, the run kept the slower target and
    # trained 1.35-1.75x BSP's time (5 seeds, the same accuracy).
    costs = RunCosts(global_batch=128)
    none_yet = MeasuredSpeed(costs=costs).before_switch(0.32, "local-sgd", 43 * 128)
    assert none_yet.action == STAY
    assert none_yet.reason == ("not trying local-sgd: BSP's speed is not measured yet, and a trial that goes back "
                               "would cost 109 steps, more than a 1.25x target would win back (5) in the 43 steps "
                               "left")
    assert MeasuredSpeed(costs=costs).before_switch(0.32, "local-sgd", 600 * 128).action == TRIAL  # 116 against 109
    one_window = MeasuredSpeed(costs=costs)
    _feed(one_window, "bsp", {0: [2400], 1: [2500]})  # each worker's first window: BSP's speed from it
    decided = one_window.before_switch(0.32, "local-sgd", 43 * 128)
    assert decided.action == STAY and decided.values["bsp_examples_per_s"] is None  # no reference for a trial
    assert decided.values["bsp_time_left_s"] == pytest.approx(43 * 128 / 4900)
    assert MeasuredSpeed().before_switch(0.32, "local-sgd", 43 * 128).action == TRIAL  # no global batch: tried


def test_resnet_at_a_fifth_of_its_workload_left_is_not_tried_where_mnist1d_is():
    # Measured at 0.4 CPU a node, 4 workers, batch 128, switch at about 0.25 (2026-11-26): every ResNet trial went
    # back (local-sgd 0.75-1.05x BSP) at two pauses of 0.76-2.09 s each; MNIST-1D kept local-sgd in 4 of 5 runs.
    budget = RunCosts(global_batch=128, cpus_per_node=0.4)

    def decide(bsp, left_s):
        rule = MeasuredSpeed(costs=budget)
        rule.on_rate("bsp", 0, bsp)  # one report a worker is left out as the phase's first: two make a measure
        rule.on_rate("bsp", 0, bsp)
        return rule.before_switch(0.25, "local-sgd", bsp * left_s)

    resnet = decide(509.4, 17.53)  # 1.51 s pauses, a 2.75 s trial: 5.8 s lost against 2.0 s won
    assert resnet.action == STAY and resnet.values["failed_trial_s"] == pytest.approx(
        2 * (0.5 + 4 * 128 / 509.4) + 128 / 509.4 + 2.5)
    assert resnet.values["bsp_step_s"] == pytest.approx(128 / 509.4)
    mnist = decide(5127.8, 35.9)  # MNIST-1D: 0.6 s pauses, a 2.5 s trial against 6.6 s won
    assert mnist.action == TRIAL and mnist.values["trial_s"] == pytest.approx(128 / 5127.8 * 101)  # 20 steps: 0.499 s
    assert mnist.values["hoped_gain_s"] == pytest.approx(35.9 * 0.2 - mnist.values["pause_s"])


def test_a_measured_pause_replaces_the_assumed_one():
    rule = MeasuredSpeed(known=(KnownSpeed("local-sgd", 1.5),), costs=HALF_SECOND_PAUSE)
    _feed(rule, "bsp", GRU_BSP)
    assert rule.before_switch(0.5, "local-sgd", 5058.5).action == STAY  # 0.5 s of 1 s left: needs 2x
    rule.on_pause(0.12)  # the run's switch measured 0.12 s: 1/(1 - 0.12) = 1.14x
    decision = rule.before_switch(0.5, "local-sgd", 5058.5)
    assert decision.action == SWITCH and decision.values["margin"] == pytest.approx(1 / 0.88)
    assert decision.values["pause_source"] == "this run"


def test_a_target_faster_than_the_noise_is_kept_however_little_is_left():
    # Going back costs a pause; keeping costs nothing more: a trial keeps any target measured above the noise floor.
    bsp = {0: [1000.0] * 11, 1: [1000.0] * 11}
    for ratio, action in ((1.3, KEEP), (0.9, BACK)):  # clear of the noise band over two reports used (+-14%)
        rule = MeasuredSpeed()
        _feed(rule, "bsp", bsp)
        assert rule.before_switch(0.5, "local-sgd", 100000).action == TRIAL
        rule.start_trial()
        _feed(rule, "target", {0: [1000 * ratio] * 3, 1: [1000 * ratio] * 3})  # the first is left out
        decision = rule.after_trial(0.95, "local-sgd", 500)
        assert decision.action == action and decision.values["margin"] == 1.1


def test_off_switches_without_judging():
    rule = IgnoreSpeed()
    _feed(rule, "bsp", GRU_BSP)
    assert rule.before_switch(0.5, "asp").action == SWITCH
    _feed(rule, "target", GRU_ASP)
    assert rule.after_trial(0.6, "asp") is None


def test_speed_rules_are_registered_by_name():
    assert SWITCH_SPEEDS.names() == ["measured", "off"]
    with pytest.raises(SpecError, match="valid: measured, off"):
        SWITCH_SPEEDS.get("fastest", field="policy.switch_speed.rule")


def _trial_with_work_left(bsp, target, left, per_report):
    """`_trial` with the workload's samples left given: `left` at the switch, `per_report` fewer each round (a fixed
    margin: the trial is made however little work is left)."""
    rule = MeasuredSpeed(SpeedSettings(margin=1.1))
    _feed(rule, "bsp", bsp)
    assert rule.before_switch(0.5, "local-sgd", samples_left=left).action == TRIAL
    rule.start_trial()
    for i in range(len(target[0])):
        for worker, series in target.items():
            rule.on_rate("target", worker, series[i])
            decision = rule.after_trial(0.5, "local-sgd", samples_left=left - per_report * (i + 1))
        if decision is not None and decision.action != MEASURE:
            return decision
    return decision


def test_measuring_on_stops_where_a_rollback_would_cost_more_than_the_target_could_win():
    # MNIST-1D seed 1's local-sgd reads 1.06x over its second report, within the noise of the 1.1x bar. With half a
    # million samples left (a minute of BSP) measuring on is cheap beside what a kept target could win; with 18,000
    # left (2.2 s of BSP) a rollback of the trial so far (2000 samples and two pauses) already costs more than even
    # the top of the band (1.28x) would win back, so the ratio decides at once: back.
    long = _trial_with_work_left(MNIST_BSP_S1, MNIST_LOCAL_SGD_S1, 500_000, 1000)
    assert long.action == MEASURE and "rollback_cost_s" not in long.values
    short = _trial_with_work_left(MNIST_BSP_S1, MNIST_LOCAL_SGD_S1, 20_000, 1000)
    assert short.action == BACK and short.values["ratio"] == pytest.approx(1.06, abs=0.01)
    values = short.values
    assert values["trial_so_far_s"] == pytest.approx(2000 / values["target_examples_per_s"])
    assert values["rollback_cost_s"] == pytest.approx(values["trial_so_far_s"] + 2 * 0.2)
    assert values["rollback_cost_s"] >= values["best_gain_s"] > 0
    assert "measuring on is not worth it: going back would throw away" in short.reason


# A residual MLP with LayerNorm (4 workers, batch 64, 240,000 samples; a user's script, 2026-11-29 seed 3): each
# worker's last 11 BSP reports before its trial at 0.245 and its local-sgd reports at 0.273-0.340. In the run the
# trial read 1.35x after two reports a worker, then 1.10x after four (its third and fourth reports dipped to
# 0.9-1.0x) and went back at 0.340: the run took 1.18x its seed's BSP time; its other seeds kept local-sgd at
# 1.25-1.41x.
RESMLP_BSP = {0: [2170, 2136, 2180, 2474, 2548, 2481, 2534, 2384, 2225, 2256, 2302],
              1: [2139, 2143, 2166, 2418, 2553, 2465, 2536, 2397, 2216, 2213, 2250],
              2: [2133, 2079, 2157, 2439, 2540, 2509, 2478, 2392, 2250, 2179, 2311],
              3: [2106, 2101, 2170, 2480, 2505, 2491, 2489, 2354, 2229, 2271, 2271]}
RESMLP_LOCAL_SGD = {0: [3234, 2977, 2699, 2687, 2783], 1: [3137, 3157, 2307, 2317, 2892],
                    2: [3104, 2997, 2372, 2326, 2988], 3: [2982, 3221, 2320, 2316, 2947]}
RESMLP_AT = [0.2731, 0.2944, 0.3147, 0.3157, 0.3403]


def _resmlp_trial(target, settings=SpeedSettings(), total=240_000):
    """The residual MLP's trial, each round decided at the workload's samples left there: the first decision other
    than measuring on, and where."""
    rule = MeasuredSpeed(settings, costs=RunCosts(global_batch=256))
    _feed(rule, "bsp", RESMLP_BSP)
    assert rule.before_switch(0.2453, "local-sgd", samples_left=(1 - 0.2453) * total).action == TRIAL
    rule.start_trial()
    for i, fraction in enumerate(RESMLP_AT):
        for worker, series in target.items():
            rule.on_rate("target", worker, series[i])
        decision = rule.after_trial(fraction, "local-sgd", samples_left=(1 - fraction) * total)
        if decision is not None and decision.action != MEASURE:
            return decision, fraction
    return None, None


def test_a_target_faster_than_bsp_even_at_the_bottom_of_its_band_is_kept_before_the_bar_is_clear():
    decision, at = _resmlp_trial(RESMLP_LOCAL_SGD)
    values = decision.values
    assert decision.action == KEEP and at == 0.2944
    assert values["ratio"] == pytest.approx(1.32, abs=0.01) and values["ratio"] * (1 - values["band"]) < 1.1
    assert values["low_ratio"] > 1.0 and values["keeping_worst_s"] < 0 < values["going_back_s"]
    assert "not clearly the 1.1x a switch needs, but going back would cost" in decision.reason
    # With a fixed margin the bar is as asked: the same trial measures on through its dip (1.32x, 1.18x, 1.04x, 1.14x).
    assert _resmlp_trial(RESMLP_LOCAL_SGD, SpeedSettings(margin=1.1)) == (None, None)


def _steady_trial(ratio, left=60_000):
    """Two workers at 1000 examples/s each under BSP (a 64-sample global batch: a 0.33 s pause), then a target at
    `ratio` times that, reporting every 1000 samples of `left` samples in all: each decision, in order."""
    rule = MeasuredSpeed(costs=RunCosts(global_batch=64))
    _feed(rule, "bsp", {0: [1000.0] * 11, 1: [1000.0] * 11})
    assert rule.before_switch(0.5, "local-sgd", samples_left=left).action == TRIAL
    rule.start_trial()
    decisions = []
    for i in range(8):
        for worker in (0, 1):
            rule.on_rate("target", worker, 1000.0 * ratio)
        decision = rule.after_trial(0.5, "local-sgd", samples_left=left - 1000 * (i + 1))
        if decision is not None:
            decisions.append(decision)
            if decision.action != MEASURE:
                break
    return decisions


def test_a_target_near_bsps_speed_is_kept_once_going_back_would_cost_more_than_it_could_lose():
    # 1.04x: within the noise of the 1.1x bar for as long as the trial may measure. Going back redoes the trial's
    # work at BSP's speed after a pause (1.3 s after two reports a worker, 0.5 s more each report); the band's bottom
    # (1.04 x (1 - 0.2 / sqrt(reports used))) could lose 5.8, 3.5, 2.5 s in the 29 s BSP has left, then 1.9 s: kept.
    decisions = _steady_trial(1.04)
    assert [d.action for d in decisions] == [MEASURE, MEASURE, MEASURE, KEEP]
    values = decisions[-1].values
    assert values["reports_used"] == 4 and values["low_ratio"] == pytest.approx(1.04 * 0.9)
    assert values["going_back_s"] == pytest.approx(5000 / 2000 + 0.2 + 4 * 64 / 2000)
    assert values["keeping_worst_s"] == pytest.approx(55_000 / 2000 * (1 / 0.936 - 1))
    # With ten times the work left, keeping could lose ten times as much: the trial measures on to its cap, and the
    # measured ratio decides there (a switch needs 1.1x: back).
    assert [d.action for d in _steady_trial(1.04, left=600_000)] == [MEASURE] * 6 + [BACK]


def test_a_target_measured_slower_than_bsp_goes_back_whatever_going_back_costs():
    decisions = _steady_trial(0.98)
    assert decisions[-1].action == BACK and "going_back_s" not in decisions[-1].values
