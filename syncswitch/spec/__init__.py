"""Job spec: load a YAML file once, apply CLI overrides, validate everything, return frozen dataclasses.

The ground floor of the house: it imports nothing above it. Names it checks (backends, policies)
are looked up in the registries of syncswitch/registry.py, which the floors above fill.
"""

from syncswitch.spec.document import TOP_KEYS, apply_override, load, validate
from syncswitch.spec.model import (DEFAULT_SWITCH_AT, DEFAULT_SWITCH_TO, NONBLOCKING_SWITCH_TO, PROTOCOLS,
                                   SWITCH_MODES, CheckpointSpec, ClusterSpec, EvaluationSpec, GuardSpec,
                                   Hyperparameters, Injection, JobSpec, LrDecay, Phase, PolicySpec, RecoverySpec,
                                   StragglerSpec, WorkloadSpec)
from syncswitch.spec.policy import (adopt_stored_reference, adopt_stored_speed, adopt_stored_switch_at,
                                    asynchronous_protocols,
                                    default_switch_to, parse_schedule, switch_at_schedule, switch_target,
                                    with_target_params)
from syncswitch.spec.stragglers import SCENARIO_PRESETS, SLOWDOWN_METHODS, expand_scenario

__all__ = ["DEFAULT_SWITCH_AT", "DEFAULT_SWITCH_TO", "NONBLOCKING_SWITCH_TO", "PROTOCOLS", "SCENARIO_PRESETS",
           "SLOWDOWN_METHODS", "SWITCH_MODES", "TOP_KEYS", "CheckpointSpec", "ClusterSpec", "EvaluationSpec",
           "GuardSpec", "Hyperparameters", "Injection", "JobSpec", "LrDecay", "Phase", "PolicySpec", "RecoverySpec",
           "StragglerSpec", "WorkloadSpec", "adopt_stored_reference", "adopt_stored_speed", "adopt_stored_switch_at",
           "apply_override",
           "asynchronous_protocols", "default_switch_to", "expand_scenario", "load", "parse_schedule",
           "switch_at_schedule", "switch_target", "validate", "with_target_params"]
