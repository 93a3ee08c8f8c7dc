"""Domain errors: each carries a one-line message meant for the user."""


class SyncSwitchError(Exception):
    """Base of every error syncswitch reports to the user without a traceback."""

    exit_code = 1


class SpecError(SyncSwitchError):
    """A job spec, override or CLI value is invalid; the message names the field."""

    exit_code = 2


class ScriptError(SyncSwitchError):
    """The user's training script breaks the input_fn / model_fn contract or raises."""

    exit_code = 2


class ClusterError(SyncSwitchError):
    """Provisioning, an agent or a training task failed."""

    exit_code = 1


class DivergedError(SyncSwitchError):
    """Training produced a NaN or infinite loss."""

    exit_code = 3


def one_line(exc: BaseException) -> str:
    """An exception in one line. TensorFlow's runtime errors start with the task that raised them ("From
    /job:worker/replica:0/task:1:"); the cause (a script's "ValueError: corrupt record 900") follows."""
    lines = [line.strip() for line in str(exc).splitlines()]
    lines = [line for line in lines if line and not (line.startswith("From /job:") and line.endswith(":"))]
    if lines and lines[0] == "Graph execution error:":
        # A session's error: where the op was defined, then "Node: 'name'", then what went wrong.
        node = next((i for i, line in enumerate(lines) if line.startswith("Node: ")), None)
        if node is not None and node + 1 < len(lines):
            lines = lines[node + 1:]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
