"""The layers of docs/architecture.md, read from the code: no module imports a layer above
its own, at module level or inside a function (a lazy import is an import all the same).
Plain pytest over the source text; imports nothing of the package."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi_skip   # single-process tier

ROOT = Path(__file__).resolve().parents[1]
# from the ground up; a layer may import itself and any layer before it
LAYERS = (
    {"graph", "nntile_kernels", "version", "rank_entry", "flight", "private_files",
     "folder_paths"},
    {"launch_watch"},
    {"plan", "launch"},
    {"runtime"},
    {"models"},
    {"simulate"},
    {"search"},
    {"train"},
    {"seed_api"},
    {"precompile", "calibrate", "generate"},
    {"__init__"},
)
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def room_of(path: Path) -> str:
    """The layer a file of the package belongs to: its top folder or module."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    if parts[0] == "nntile_kernels":
        return "nntile_kernels"
    return parts[1]


def imported_rooms(path: Path):
    """(line, room) of every import of another part of the project in `path`."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    if path.name == "__init__.py":
        package = path.relative_to(ROOT).parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = (*base, *(node.module or "").split(".")) if node.module else base
                names = [target] if node.module else [(*base, alias.name) for alias in node.names]
            else:
                names = [tuple(node.module.split("."))]
        elif isinstance(node, ast.Import):
            names = [tuple(alias.name.split(".")) for alias in node.names]
        else:
            continue
        for name in names:
            if name and name[0] == "nntile_kernels":
                yield node.lineno, "nntile_kernels"
            elif name and name[0] == "nntile_spmd":
                yield node.lineno, name[1] if len(name) > 1 else "__init__"


SOURCES = sorted([*ROOT.glob("nntile_spmd/**/*.py"), *ROOT.glob("nntile_kernels/*.py")])


def test_every_part_of_the_package_has_a_layer():
    assert {room_of(path) for path in SOURCES} <= set(LEVEL)


def test_no_import_runs_back_up_the_layers():
    upward = []
    for path in SOURCES:
        room = room_of(path)
        for line, target in imported_rooms(path):
            if target != room and LEVEL.get(target, -1) >= LEVEL[room]:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({room}) imports {target}")
    assert not upward, "\n".join(upward)
