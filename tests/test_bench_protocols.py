"""The protocols benchmark's variant names: a protocol, its parameters, and BSP then a protocol."""

import pytest

from bench import protocols


def test_variants_parse_to_schedules():
    (phase,) = protocols.schedule_of("specsync(adaptive=true,abort_time=0.05)")
    assert phase.protocol == "specsync"
    assert phase.param_dict == {"abort_rate": 0.5, "abort_time": 0.05, "adaptive": True}
    (phase,) = protocols.schedule_of("bsp(aggregate=3)")
    assert phase.param_dict == {"aggregate": 3, "allreduce": False}
    first, second = protocols.schedule_of("bsp>lookahead(adaptive=False)")
    assert (first.protocol, first.until, second.protocol) == ("bsp", 0.25, "lookahead")
    assert second.param_dict["adaptive"] is False


def test_a_bad_variant_names_the_field():
    from syncswitch.errors import SpecError

    with pytest.raises(SpecError, match="abort_time"):
        protocols.schedule_of("specsync(abort_time=-1)")
