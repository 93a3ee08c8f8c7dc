"""The script's folder as a bundle: what it ships, what stays home, its limit, and a safe unpack."""

import io
import os
import zipfile

import pytest

from syncswitch.wire import bundle


def _tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_folder_travels_with_its_script_and_unpacks_the_same(tmp_path):
    src = tmp_path / "proj"
    _tree(src, {"train.py": "import lib\n", "lib.py": "X = 1\n", "data/a.csv": "1,2\n", "sub/deep/b.txt": "b"})
    made = bundle.make(str(src / "train.py"), str(src))
    assert made.script_name == "train.py" and made.files == 4 and made.size == 11 + 6 + 4 + 1
    out = tmp_path / "out"
    out.mkdir()
    bundle.unpack(made.data, str(out))
    for name in ("train.py", "lib.py", "data/a.csv", "sub/deep/b.txt"):
        assert (out / name).read_text() == (src / name).read_text()


def test_a_script_in_a_subfolder_is_named_by_its_path_in_the_bundle(tmp_path):
    _tree(tmp_path / "proj", {"jobs/train.py": "", "common.py": ""})
    made = bundle.make(str(tmp_path / "proj" / "jobs" / "train.py"), str(tmp_path / "proj"))
    assert made.script_name == os.path.join("jobs", "train.py")


def test_hidden_entries_caches_and_run_folders_stay_home(tmp_path):
    src = tmp_path / "proj"
    _tree(src, {"train.py": "", ".git/HEAD": "x", ".env": "secret", "__pycache__/m.pyc": "x", "m.pyc": "x",
                "runs/old/run.json": "{}", "runs/old/nodes/0/ckpt": "x" * 100, "out/keep.txt": "k",
                "skipme/big.bin": "x"})
    made = bundle.make(str(src / "train.py"), str(src), skip=(str(src / "skipme"),))
    names = sorted(zipfile.ZipFile(io.BytesIO(made.data)).namelist())
    assert names == ["out/keep.txt", "train.py"]


def test_a_folder_over_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "LIMIT_BYTES", 1000)
    _tree(tmp_path, {"train.py": "", "data.bin": "x" * 1001})
    with pytest.raises(bundle.BundleTooLarge, match="more than 0 MiB"):
        bundle.make(str(tmp_path / "train.py"), str(tmp_path))


def test_the_script_alone_is_an_empty_bundle(tmp_path):
    _tree(tmp_path, {"train.py": ""})
    made = bundle.make(str(tmp_path / "train.py"), None)
    assert (made.script_name, made.data) == ("train.py", b"")


def test_a_member_leaving_the_folder_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("../evil.py", "x")
    (tmp_path / "dest").mkdir()
    with pytest.raises(ValueError, match="leaves the script folder"):
        bundle.unpack(buffer.getvalue(), str(tmp_path / "dest"))
    assert not (tmp_path / "evil.py").exists()


def test_links_go_as_links_inside_relative_outside_absolute(tmp_path):
    outside = tmp_path / "mnt" / "datasets"
    outside.mkdir(parents=True)
    (outside / "big.bin").write_bytes(b"x" * 5000)
    src = tmp_path / "proj"
    _tree(src, {"train.py": "", "v2/w.txt": "w"})
    os.symlink(str(outside), src / "data")              # a dataset on another disk: not copied
    os.symlink("v2", src / "latest")                    # inside the folder: stays relative
    os.symlink("../mnt/datasets/big.bin", src / "big")  # relative, but leaves the folder: made absolute
    made = bundle.make(str(src / "train.py"), str(src))
    assert made.size == 1  # only w.txt's byte and the empty script: nothing behind a link is read
    out = tmp_path / "out"
    out.mkdir()
    bundle.unpack(made.data, str(out))
    assert os.readlink(out / "data") == str(outside) and (out / "data" / "big.bin").stat().st_size == 5000
    assert os.readlink(out / "latest") == "v2" and (out / "latest" / "w.txt").read_text() == "w"
    assert os.readlink(out / "big") == str(outside / "big.bin")


def test_a_member_beneath_a_link_is_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        info = zipfile.ZipInfo("data")
        info.external_attr = bundle.LINK_MODE
        zf.writestr(info, str(tmp_path / "elsewhere"))
        zf.writestr("data/evil.py", "x")  # would be written through the link
    (tmp_path / "dest").mkdir()
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ValueError, match="leaves the script folder"):
        bundle.unpack(buffer.getvalue(), str(tmp_path / "dest"))
    assert not (tmp_path / "elsewhere" / "evil.py").exists()


def test_a_folder_of_too_many_files_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "LIMIT_FILES", 3)
    _tree(tmp_path, {"train.py": "", "a.py": "", "b.py": "", "c.py": ""})
    with pytest.raises(bundle.BundleTooLarge, match="holds more than 3 files"):
        bundle.make(str(tmp_path / "train.py"), str(tmp_path))
