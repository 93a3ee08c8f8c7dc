"""The CLI package itself: light to import, reachable as `python -m syncswitch`, one error-to-exit-code mapping."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from syncswitch.cli.errors import INTERRUPTED_EXIT, friendly_errors
from syncswitch.cli.logs import configure_logging
from syncswitch.errors import ClusterError, DivergedError, ScriptError, SpecError, SyncSwitchError
from tests.conftest import ROOT

COMMANDS = ("submit", "resume", "experiment", "report", "search", "policy", "guard", "cluster", "simulate")


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}  # this checkout's code, not the installed one
    return subprocess.run([sys.executable, *args, "-c", code] if code else [sys.executable, *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_help_of_every_command_never_imports_tensorflow():
    # `syncswitch --help` stays fast: TensorFlow (seconds to import) loads only when a job runs
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from syncswitch.cli import cli\n"
            f"for args in [['--help']] + [[c, '--help'] for c in {COMMANDS!r}]:\n"
            "    assert CliRunner().invoke(cli, args).exit_code == 0, args\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras')))\n")
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_python_m_syncswitch_lists_every_command():
    out = _python("", "-m", "syncswitch", "--help")
    assert out.returncode == 0, out.stderr
    listed = {line.split()[0] for line in out.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(COMMANDS)


def _raising(exc: BaseException):
    @click.command()
    @friendly_errors(interrupted="stopped; partial results kept")
    def command():
        raise exc

    return command


@pytest.mark.parametrize("exc, code", [(SpecError("bad field x"), 2), (ScriptError("bad field x"), 2),
                                       (ClusterError("bad field x"), 1), (DivergedError("bad field x"), 3),
                                       (SyncSwitchError("bad field x"), 1)])
def test_domain_errors_are_one_line_and_their_exit_code(exc, code, monkeypatch):
    monkeypatch.delenv("SYNCSWITCH_DEBUG", raising=False)
    result = CliRunner().invoke(_raising(exc), [])
    assert (result.exit_code, result.output) == (code, "error: bad field x\n")


def test_interrupt_prints_its_line_and_exits_130(monkeypatch):
    monkeypatch.delenv("SYNCSWITCH_DEBUG", raising=False)
    result = CliRunner().invoke(_raising(KeyboardInterrupt()), [])
    assert (result.exit_code, result.output) == (INTERRUPTED_EXIT, "stopped; partial results kept\n")


def test_debug_lets_the_traceback_through(monkeypatch):
    monkeypatch.setenv("SYNCSWITCH_DEBUG", "1")
    result = CliRunner().invoke(_raising(SpecError("bad field x")), [])
    assert isinstance(result.exception, SpecError) and "error:" not in result.output


def test_other_exceptions_are_not_swallowed(monkeypatch):
    # only domain errors are the user's to fix; anything else is a bug and keeps its traceback
    monkeypatch.delenv("SYNCSWITCH_DEBUG", raising=False)
    result = CliRunner().invoke(_raising(ValueError("bug")), [])
    assert isinstance(result.exception, ValueError)


@pytest.fixture
def syncswitch_logger():
    logger = logging.getLogger("syncswitch")
    saved = (logger.handlers[:], logger.level)
    logger.handlers[:] = []
    yield logger
    logger.handlers[:], logger.level = saved


@pytest.mark.parametrize("verbose, shown", [(False, ["WARNING syncswitch.backends.gce: quota"]),
                                            (True, ["INFO syncswitch.backends.gce: zone b",
                                                    "WARNING syncswitch.backends.gce: quota"])])
def test_logging_goes_to_stderr_warnings_by_default_info_with_verbose(verbose, shown, syncswitch_logger, capsys):
    configure_logging(verbose)
    configure_logging(verbose)  # a second command in one process adds no second handler
    log = logging.getLogger("syncswitch.backends.gce")
    log.info("zone b")
    log.warning("quota")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == shown
