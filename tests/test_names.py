"""Names a grep can trust (issue 42, item 8): no public name is defined at the top level of two
modules of the package, and no import gives one of the package's names another name. Read from
the source with `ast`, as tests/test_layering.py reads the imports."""

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"

# Public names still defined in two modules, each with the two files and why it stays (none
# now). Rename the side that is least public rather than add one here.
SHARED_NAMES: dict[str, set[str]] = {}

# Imports that give an explorer name another name: (file, imported name, the name given).
RENAMING_IMPORTS = {
    # The package's public face: the exploration loader under the name __all__ lists, and the
    # module imported first of all for what its import does.
    ("explorer/__init__.py", "load", "load_exploration"),
    ("explorer/__init__.py", "quiet_jax", "_quiet_jax"),
}


def _files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _is_overload(node: ast.AST) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "overload")
               or (isinstance(d, ast.Attribute) and d.attr == "overload")
               for d in getattr(node, "decorator_list", ()))


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module's own top-level statements define: functions and classes (an
    @overload stub is not a definition of its own), assignments and annotated assignments."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not _is_overload(node):
                out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def _public_definitions() -> dict[str, set[str]]:
    """Public name -> the files whose top level defines it (`main`, each entry point's own, is
    left out)."""
    where = defaultdict(set)
    for path in _files():
        for name in _top_level_names(ast.parse(path.read_text())):
            if not name.startswith("_") and name != "main":
                where[name].add(_rel(path))
    return where


def _renaming_imports() -> set[tuple[str, str, str]]:
    """(file, name, as-name) for each import of an explorer module's name under another name."""
    out = set()
    for path in _files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").split(".")[0] == "explorer"):
                out.update((_rel(path), a.name, a.asname) for a in node.names
                           if a.asname and a.asname != a.name)
            elif isinstance(node, ast.Import):
                out.update((_rel(path), a.name, a.asname) for a in node.names
                           if a.asname and a.name.split(".")[0] == "explorer")
    return out


def test_no_public_name_is_defined_in_two_modules():
    shared = {name: files for name, files in _public_definitions().items() if len(files) > 1}
    unexpected = {name: sorted(files) for name, files in shared.items()
                  if SHARED_NAMES.get(name) != files}
    assert not unexpected, (
        f"public names defined in more than one module: {unexpected}. Give one a name that says "
        "what it is (in the module where it is least public), or import the one home of a "
        "thing defined twice")


@pytest.mark.slow
def test_the_shared_names_allowed_are_still_shared():
    where = _public_definitions()
    stale = sorted(name for name, files in SHARED_NAMES.items() if where.get(name) != files)
    assert not stale, f"no longer defined in exactly the files listed: {stale}; take them out " \
                      "of SHARED_NAMES"


@pytest.mark.slow
def test_no_import_renames_an_explorer_name():
    found = _renaming_imports()
    assert not found - RENAMING_IMPORTS, (
        f"imports that rename an explorer name: {sorted(found - RENAMING_IMPORTS)}. Import it "
        "as it is defined, or rename it where it is defined if its name clashes")
    assert not RENAMING_IMPORTS - found, (
        f"no longer in the source: {sorted(RENAMING_IMPORTS - found)}; take them out of "
        "RENAMING_IMPORTS")


@pytest.mark.slow
def test_the_scan_sees_what_it_checks():
    # A scan that read nothing would pass: it finds names known to be defined once, a known
    # public-face alias, and leaves an @overload stub and `main` out.
    where = _public_definitions()
    assert where["Request"] == {"explorer/_src/api/analysis_request.py"}
    assert where["targets"] == {"explorer/_src/cost/catalog/names.py"}
    assert "main" not in where
    assert ("explorer/__init__.py", "load", "load_exploration") in _renaming_imports()
    tree = ast.parse("@overload\ndef f(x: int) -> int: ...\n@typing.overload\ndef g(): ...\n"
                     "def h(x): return x\nclass K: ...\nA, (B, C) = 1, (2, 3)\nD: int = 4\n")
    assert _top_level_names(tree) == {"h", "K", "A", "B", "C", "D"}
