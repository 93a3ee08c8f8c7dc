"""A stand-in for the evaluator process (run as a script): the same wire messages, accuracy from the fraction.

FAKE_EVAL_DELAY_S makes each evaluation take that long; FAKE_EVAL_COLLAPSE_AFTER=F scores the first
branch's checkpoints (named model.ckpt-*) after fraction F at 0.1, as if the model had collapsed there, up to
FAKE_EVAL_COLLAPSE_UNTIL (as if it had recovered after; default never);
FAKE_EVAL_CRASH makes it exit right after saying it is ready.
"""

import os
import sys
import time

from syncswitch.node.eval_queue import RequestQueue
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec


def main() -> None:
    codec.decode(sys.stdin.readline(), pb.EvaluatorConfig)
    sys.stdout.write(codec.encode(codec.event(evaluator_ready=pb.EvaluatorReady())) + "\n")
    sys.stdout.flush()
    if os.environ.get("FAKE_EVAL_CRASH"):
        sys.exit(1)  # as an evaluator that died before its first checkpoint
    delay = float(os.environ.get("FAKE_EVAL_DELAY_S", "0"))
    collapse = float(os.environ.get("FAKE_EVAL_COLLAPSE_AFTER", "2"))
    recovered = float(os.environ.get("FAKE_EVAL_COLLAPSE_UNTIL", "2"))
    queue = RequestQueue(sys.stdin)  # the real evaluator's order: newest first, cancelled ones dropped
    while (job := queue.next()) is not None:
        time.sleep(delay)
        accuracy = 0.5 + 0.4 * job.fraction
        if collapse < job.fraction <= recovered and os.path.basename(job.path).startswith("model.ckpt-"):
            accuracy = 0.1
        evaluation = pb.Evaluation(fraction=job.fraction, time_s=job.time_s, checkpoint=job.path,
                                   accuracy=accuracy, loss=1.0 - job.fraction, examples=100)
        sys.stdout.write(codec.encode(codec.event(evaluation=evaluation)) + "\n")
        sys.stdout.flush()
    sys.stdout.write(codec.encode(codec.event(evaluator_done=pb.EvaluatorDone())) + "\n")


if __name__ == "__main__":
    main()
