"""The run's records as they travel between the manager's parts and through run.json."""

import json

from syncswitch.cluster_manager.lifecycle import RunStatus
from syncswitch.cluster_manager.plan import SwitchMode
from syncswitch.cluster_manager.record import EvaluationResult, RunRecord
from syncswitch.wire import agent_pb2 as pb


def test_an_evaluation_keeps_the_path_the_task_reported_and_survives_run_json():
    event = pb.Evaluation(fraction=0.5, time_s=12.5, checkpoint="/local/copy/model.ckpt-40", accuracy=0.81, loss=0.6,
                          examples=1000, eval_s=0.4)
    result = EvaluationResult.from_event(event, written="/chief/model.ckpt-40")
    assert (result.written, result.checkpoint, result.examples) == ("/chief/model.ckpt-40",
                                                                     "/local/copy/model.ckpt-40", 1000)
    assert EvaluationResult.from_dict(json.loads(json.dumps(result.as_dict()))) == result
    assert result.summary() == {"fraction": 0.5, "time_s": 12.5, "accuracy": 0.81, "loss": 0.6}


def test_an_older_run_folder_s_evaluation_without_its_written_path_names_the_checkpoint_read():
    kept = {"fraction": 0.2, "time_s": 3.0, "checkpoint": "/run/model.ckpt-8", "accuracy": 0.5, "loss": 1.2,
            "extra": "a field this version does not know"}
    result = EvaluationResult.from_dict(kept)
    assert result.written == "/run/model.ckpt-8" and result.eval_s == 0.0


def test_a_record_taken_over_from_run_json_gets_its_abandoned_evaluations_back_as_records():
    record = RunRecord("job-1", "/run", SwitchMode.IN_PLACE, 100.0, status=RunStatus.INTERRUPTED)
    record.abandoned_evaluations = [EvaluationResult(0.6, 20.0, 0.3, 2.0, "/run/model.ckpt-60")]
    saved = json.loads(json.dumps(record.kept()))
    again = RunRecord("job-1", "/run", SwitchMode.IN_PLACE, 0.0)
    again.take_over(saved)
    assert again.abandoned_evaluations == record.abandoned_evaluations and again.t_submit == 100.0
