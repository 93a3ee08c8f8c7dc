"""The house rules: imports run downward only (floors of docs/architecture.md), and modules stay small."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "syncswitch"

# Top-level part of syncswitch -> its floor. A module may import its own floor or below.
FLOORS = {
    "__init__": 1, "errors": 1, "registry": 1, "metrics": 1, "files": 1, "spec": 1,
    "policies": 2, "protocols": 2, "wire": 2,
    "node": 3, "cluster_manager": 3, "search": 3, "simulator": 3,
    "cli": 4, "__main__": 4,
}
MAX_LINES = 400


def _modules():
    """Every hand-written module (the protobuf generator's *_pb2*.py are not ours to shape)."""
    return sorted(p for p in PACKAGE.rglob("*.py") if "_pb2" not in p.name)


def _dotted(path: pathlib.Path) -> list[str]:
    """`syncswitch/cli/submit.py` -> ["syncswitch", "cli", "submit"]; a package's __init__ is the package."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _floor_of(parts: list[str]) -> tuple[str, int | None]:
    """The floor of a dotted name inside syncswitch; `import syncswitch` alone is the ground floor."""
    top = parts[1] if len(parts) > 1 else "__init__"
    return top, FLOORS.get(top)


def _targets(tree: ast.AST, path: pathlib.Path):
    """(line, dotted target) for every import of syncswitch, at module level or inside functions."""
    here = _dotted(path)
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "syncswitch":
                    yield node.lineno, alias.name.split(".")
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "syncswitch":
                base = node.module.split(".")
            else:
                continue
            if len(base) == 1:  # `from syncswitch import spec, __version__`: a module, or a name of the root
                for alias in node.names:
                    module = (PACKAGE / f"{alias.name}.py").exists() or (PACKAGE / alias.name).is_dir()
                    yield node.lineno, base + [alias.name] if module else base
            else:
                yield node.lineno, base


def _violations():
    out = []
    for path in _modules():
        here, floor = _floor_of(_dotted(path))
        rel = path.relative_to(PACKAGE.parent)
        if floor is None:
            out.append(f"{rel}: '{here}' has no floor in tests/test_layers.py FLOORS (and docs/architecture.md)")
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in _targets(tree, path):
            top, target_floor = _floor_of(target)
            if target_floor is None:
                out.append(f"{rel}:{line}: imports {'.'.join(target)}, whose '{top}' has no floor")
            elif target_floor > floor:
                out.append(f"{rel}:{line}: floor {floor} ({here}) imports {'.'.join(target)} "
                           f"on floor {target_floor} ({top})")
    return out


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path):
    # the rule is only as good as the parser: a lazy upward import must count
    source = "def f():\n    from syncswitch.cli import main\n    from ..cli import errors\n"
    path = PACKAGE / "spec" / "probe.py"
    found = list(_targets(ast.parse(source), path))
    assert found == [(2, ["syncswitch", "cli"]), (3, ["syncswitch", "cli"])]
    assert _floor_of(found[0][1]) == ("cli", 4)
    source = "from syncswitch import spec, cli, __version__\nimport syncswitch.node.task\n"
    assert [(line, _floor_of(t)) for line, t in _targets(ast.parse(source), PACKAGE / "errors.py")] == [
        (1, ("spec", 1)), (1, ("cli", 4)), (1, ("__init__", 1)), (2, ("node", 3))]


def test_imports_run_downward_only():
    violations = _violations()
    assert not violations, "upward imports:\n" + "\n".join(violations)


def test_the_manager_side_does_not_import_tensorflow():
    """The CLI and the manager start in well under a second: TensorFlow belongs to the node side."""
    heavy = []
    for path in _modules():
        parts = path.relative_to(PACKAGE).parts
        if parts[0] in ("node", "simulator") or "engines" in parts or path.name == "engines.py":
            continue  # the training task's side, and the simulator (the model in one process): they build it
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            heavy += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for n in names
                      if n.split(".")[0] == "tensorflow"]
    assert not heavy, f"TensorFlow imported outside the node side: {heavy}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_hand_written_modules_stay_small(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines; split it by what it holds"
