"""The protocols benchmark's variants are `syncswitch experiment` variants; its verdict picks the target."""

import os

from bench import protocols
from tests.conftest import ROOT


def test_second_phase_variants_use_the_experiment_syntax():
    from syncswitch import spec as specmod
    from syncswitch.cluster_manager.experiments import variant_policy

    spec = specmod.load(os.path.join(ROOT, "jobs", "quickstart.yaml"))
    first, second = variant_policy(spec, protocols.second_phase("lookahead")).schedule
    assert (first.protocol, first.until, second.protocol) == ("bsp", protocols.SECOND_AFTER, "lookahead")
    for protocol in protocols.PROTOCOLS:
        variant_policy(spec, protocol)


def test_verdict_needs_bsp_accuracy_at_asp_speed():
    def stats(acc, speed):
        return {"final_accuracy": {"median": acc}, "examples_per_s": {"median": speed}}

    results = {"bsp": stats(0.80, 100), "asp": stats(0.70, 300), "ssp": stats(0.795, 280),
               "fasgd": stats(0.78, 300), "switch@0.25:ssp": stats(0.81, 290)}
    v = protocols.verdict(results)
    assert v["meets_target"] == ["ssp"] and v["best"] == "ssp"  # second-phase variants are no standalone target
