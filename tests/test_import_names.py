"""The suite imports its own helpers by names no dependency can shadow.

pytest puts each test folder on `sys.path`; a plain module there wins over an installed
one, but a folder without `__init__.py` is only a namespace package, which any installed
package of that name hides (transformers installs one called `kernels`, and
`from kernels.kernel_cases import ...` then failed). So an import that reaches into a
test folder goes through the `tests` package, and no test module shares its top-level
name with an installed distribution's.
"""

import ast
import importlib.metadata
import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FOLDERS = {path.name for path in TESTS.iterdir() if path.is_dir() and path.name != "__pycache__"}
SOURCES = sorted(TESTS.rglob("*.py"))


def imported_modules(source: Path):
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)


def test_tests_is_a_regular_package_of_this_repository():
    spec = importlib.util.find_spec("tests")
    assert spec.origin == str(TESTS / "__init__.py"), spec


def test_no_import_reaches_into_a_test_folder_by_its_bare_name():
    bare = [f"{source.relative_to(TESTS)}:{line}: {module}"
            for source in SOURCES for line, module in imported_modules(source)
            if module.split(".")[0] in FOLDERS]
    assert not bare, "import these through the tests package (tests.<folder>...):\n" + \
        "\n".join(bare)


def test_no_test_module_is_named_like_an_installed_package():
    installed = importlib.metadata.packages_distributions()
    clashes = {source.stem: installed[source.stem] for source in SOURCES
               if source.stem in installed and source.stem not in ("__init__", "conftest")}
    assert not clashes, f"test modules named like installed packages: {clashes}"
