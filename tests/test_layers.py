"""The house rules: imports run downward only (floors of docs/architecture.md), and modules stay small."""

from __future__ import annotations

import abc
import ast
import dataclasses
import importlib
import pathlib
import typing

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "syncswitch"

# Top-level part of syncswitch -> its floor. A module may import its own floor or below.
FLOORS = {
    "__init__": 1, "errors": 1, "registry": 1, "metrics": 1, "files": 1, "spec": 1, "runfolder": 1, "cgroup_cpu": 1,
    "policies": 2, "protocols": 2, "wire": 2,
    "node": 3, "cluster_manager": 3, "search": 3, "backends": 3, "simulator": 3,
    "cli": 4, "__main__": 4,
}
MAX_LINES = 400
MAX_FUNCTION_LINES = 60
# Rooms of one floor are independent unless listed here: the cluster manager provisions through the backends; the
# simulator runs the manager's plan and guard on a script the node side loads, and hands the search its pilots. The
# node side, the search and the backends import none of their floor-mates (what they share lives a floor below).
SAME_FLOOR = {"cluster_manager": {"backends"}, "simulator": {"cluster_manager", "node", "search"}}
SEPARATE_FLOORS = (3,)  # floors whose rooms follow SAME_FLOOR
# Where classes combine only interfaces (ABCs) and dataclasses (every module of the package stays small and every
# function short).
SHAPED = ("cluster_manager",)


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


def _string_import(node: ast.AST) -> list[str] | None:
    """The dotted module an `importlib.import_module("syncswitch...")` or `__import__("syncswitch...")` call names."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    first = node.args[0]
    if name in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
        parts = first.value.split(".")
        return parts if parts[0] == "syncswitch" else None
    return None


def _imports_by_a_variable(tree: ast.AST) -> bool:
    """Whether the module hands import_module (or __import__) anything but a string written at the call."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and _string_import(node) is None:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in ("import_module", "__import__") and not (
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                return True
    return False


def _module_names(tree: ast.AST):
    """(line, dotted name) for every string constant of the module that names a syncswitch module: what a module
    that imports by a variable may load (a table of module names, a registry's list of packages)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("syncswitch."):
            parts = node.value.split(".")
            if all(part.isidentifier() for part in parts) and (
                    (PACKAGE.parent.joinpath(*parts).with_suffix(".py")).exists()
                    or PACKAGE.parent.joinpath(*parts).is_dir()):
                yield node.lineno, parts


def _targets(tree: ast.AST, path: pathlib.Path):
    """(line, dotted target) for every import of syncswitch, at module level or inside functions, by statement or by
    a string handed to import_module; in a module that imports by a variable, every module it names in a string."""
    here = _dotted(path)
    package = here if path.name == "__init__.py" else here[:-1]
    literal = set()
    for node in ast.walk(tree):
        by_string = _string_import(node)
        if by_string:
            literal.add((node.lineno, tuple(by_string)))
            yield node.lineno, by_string
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
    if _imports_by_a_variable(tree):
        yield from ((line, parts) for line, parts in _module_names(tree) if (line, tuple(parts)) not in literal)


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
            elif (target_floor == floor and floor in SEPARATE_FLOORS and top != here
                  and top not in SAME_FLOOR.get(here, ())):
                out.append(f"{rel}:{line}: {here} imports {'.'.join(target)}, a room of its own floor {floor} "
                           f"({top}) it may not use (tests/test_layers.py SAME_FLOOR)")
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


def test_the_checker_sees_imports_by_string():
    source = ("import importlib\nm = importlib.import_module('syncswitch.cli.main')\n"
              "n = __import__('syncswitch.node.task')\nimportlib.import_module(name)\n")
    found = list(_targets(ast.parse(source), PACKAGE / "registry.py"))
    assert found == [(2, ["syncswitch", "cli", "main"]), (3, ["syncswitch", "node", "task"])]
    assert [_floor_of(t)[1] for _, t in found] == [4, 3]


def test_the_checker_sees_modules_named_for_an_import_by_a_variable():
    # a registry that kept the names of the packages to load and imported them on the first lookup hid an upward
    # import from a check that reads only the strings written at the call
    source = ("import importlib\nBUILTINS = ('syncswitch.policies', 'syncswitch.protocols.catalog', 'not.ours')\n"
              "def load():\n    for module in BUILTINS:\n        importlib.import_module(module)\n")
    found = list(_targets(ast.parse(source), PACKAGE / "registry.py"))
    assert found == [(2, ["syncswitch", "policies"]), (2, ["syncswitch", "protocols", "catalog"])]
    assert [_floor_of(t)[1] for _, t in found] == [2, 2]
    # without an import by a variable, a module's name in a string is only text (an error message, a command)
    assert list(_targets(ast.parse("HINT = 'import syncswitch.policies'\nX = 'syncswitch.policies'\n"),
                         PACKAGE / "registry.py")) == []


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


def _shaped_modules():
    return [p for p in _modules() if p.relative_to(PACKAGE).parts[0] in SHAPED]


def _long_functions(paths, root=PACKAGE.parent):
    """(module, line, name, lines) for every function, method or nested function over MAX_FUNCTION_LINES."""
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    yield str(path.relative_to(root)), node.lineno, node.name, lines


def test_functions_stay_short():
    long = [f"{rel}:{line} {name} has {lines} lines" for rel, line, name, lines in _long_functions(_modules())]
    assert not long, "functions over the limit; split them by what they do:\n" + "\n".join(long)


def test_the_function_check_sees_methods_and_nested_functions(tmp_path):
    body = "            x = 1\n"
    source = ("class A:\n    def f(self):\n        def g():\n" + body * 60 + "        return g\n"
              "    async def h(self):\n" + "        x = 1\n" * 60)
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    found = sorted(_long_functions([tmp_path / "m.py"], tmp_path))
    assert found == [("m.py", 2, "f", 63), ("m.py", 3, "g", 61), ("m.py", 65, "h", 61)]
    (tmp_path / "m.py").write_text(source.replace(body, "", 1), encoding="utf-8")  # g at 60 lines: in bounds
    assert [name for _, _, name, _ in _long_functions([tmp_path / "m.py"], tmp_path)] == ["f", "h"]


def test_the_size_checks_cover_every_part_of_the_package():
    # not only the cluster manager: every top-level part with modules is walked
    parts = {p.relative_to(PACKAGE).parts[0] for p in _modules() if len(p.relative_to(PACKAGE).parts) > 1}
    assert parts == {top for top, floor in FLOORS.items() if (PACKAGE / top).is_dir()}


def _several_bases():
    """(where, class) for every class of the shaped packages with more than one base."""
    for path in _shaped_modules():
        module = importlib.import_module(".".join(_dotted(path)))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and len(node.bases) > 1 and hasattr(module, node.name):
                yield f"{path.relative_to(PACKAGE.parent)}:{node.lineno}", getattr(module, node.name)


def _an_interface(base) -> bool:
    return base is object or isinstance(base, abc.ABCMeta) or dataclasses.is_dataclass(base) or \
        getattr(base, "__origin__", None) is typing.Generic


def test_classes_combine_no_mixins():
    """A class with several bases combines interfaces (ABCs) or is a dataclass: behaviour is composed from
    collaborators handed in, not inherited from mixins that reach into each other's attributes."""
    mixed = [f"{where} {cls.__name__}{tuple(b.__name__ for b in cls.__bases__)}" for where, cls in _several_bases()
             if _mixes(cls)]
    assert not mixed, "classes with several bases that are not interfaces:\n" + "\n".join(mixed)


def _mixes(cls) -> bool:
    return not dataclasses.is_dataclass(cls) and not all(_an_interface(b) for b in cls.__bases__)


def test_the_mixin_check_tells_mixins_from_interfaces():
    class Events:
        def on_event(self):
            return self.record  # reaches into an attribute another base sets

    class Recovery:
        record = None

    class Sink(abc.ABC):
        @abc.abstractmethod
        def write(self): ...

    class Source(abc.ABC):
        @abc.abstractmethod
        def read(self): ...

    @dataclasses.dataclass
    class Base:
        x: int = 0

    class Run(Events, Recovery):
        pass

    class Pipe(Sink, Source):
        def write(self): ...

        def read(self): ...

    @dataclasses.dataclass
    class Record(Base, Recovery):
        y: int = 0

    assert [_mixes(c) for c in (Run, Pipe, Record)] == [True, False, False]


def test_the_registry_imports_nothing_above_it():
    """Backends, policies and protocols register when the layer that uses them imports their package; neither the
    registry nor the spec loads them, and a lookup in an empty registry names the package to import."""
    import subprocess
    import sys

    code = ("import sys\nfrom syncswitch import registry, spec\nfrom syncswitch.errors import SpecError\n"
            "for table, name in ((registry.BACKENDS, 'local'), (registry.PROTOCOLS, 'bsp'),\n"
            "                    (registry.STRAGGLER_POLICIES, 'greedy'), (registry.SWITCH_RULES, 'loss')):\n"
            "    try:\n        table.get(name)\n    except SpecError as exc:\n        print(exc)\n"
            "print(sorted(m.split('.')[1] for m in sys.modules if m.count('.') == 1 and m.startswith('syncswitch.')))\n"
            "import syncswitch.backends, syncswitch.policies\n"
            "print(registry.BACKENDS.names()[:2], registry.PROTOCOLS.names()[:2], registry.SWITCH_RULES.names())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout.splitlines()
    assert out[:4] == ["unknown backend 'local': none is registered; import syncswitch.backends first",
                       "unknown protocol 'bsp': none is registered; import syncswitch.protocols first",
                       "unknown straggler policy 'greedy': none is registered; import syncswitch.policies first",
                       "unknown switch rule 'loss': none is registered; import syncswitch.policies first"]
    loaded = eval(out[4])  # the top-level parts the ground floor pulled in
    assert all(FLOORS[part] == 1 for part in loaded), loaded
    assert out[5] == "['gce', 'local'] ['asp', 'b-fasgd'] ['fixed', 'loss']"
