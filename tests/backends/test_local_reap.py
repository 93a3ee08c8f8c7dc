"""`LocalBackend.reap`: a resume ends the agents a dead manager left, and only those."""

import json
import subprocess
import sys
import time

from syncswitch.backends.local import AGENTS_FILE, LocalBackend


def _sleeper(*args):
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *args], start_new_session=True)


def test_reap_kills_the_listed_agents_whose_command_line_matches(tmp_path):
    work_dir = str(tmp_path / "nodes" / "0")
    ours, stranger = _sleeper("--work-dir", work_dir), _sleeper("--work-dir", "/elsewhere")
    try:
        (tmp_path / AGENTS_FILE).write_text(json.dumps([{"pid": ours.pid, "work_dir": work_dir},
                                                        {"pid": stranger.pid, "work_dir": work_dir}]))
        time.sleep(0.2)
        lines = LocalBackend.reap(str(tmp_path))
        assert lines == [f"killed the orphaned agent {ours.pid} of {work_dir} and its tasks"]
        assert ours.wait(timeout=5) == -9
        assert stranger.poll() is None  # a reused pid is not ours to kill
    finally:
        for proc in (ours, stranger):
            proc.kill()
            proc.wait()
    assert LocalBackend.reap(str(tmp_path / "none")) == []
