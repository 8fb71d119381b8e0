"""The package's shape, as docs/architecture.md draws it: the implementation private under
explorer/_src, one subpackage per pipeline stage, imports pointing one way down the pipeline,
no cycles, UI libraries only in explorer._src.ui and jax only where programs are compiled; the
public faces (explorer, explorer.ui, explorer.cli) only re-export. Read from the source with
`ast`, so lazy imports inside functions count too."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"

# Stage -> rank. A module may import modules of its own stage or of a lower rank, never higher.
RANKS = {
    "errors": 0, "quiet_jax": 0, "units": 0, "lru": 0,
    "spec": 1,
    "hlo": 2,
    "cost": 3,
    "compile": 4, "workloads": 4,
    "report": 5, "strategy": 5, "estimate": 5,
    "api": 6,
    "layout_search": 7,
    "ui": 8,
    "cli": 9, "app_page": 9,
    "face": 10,
}
# The public faces: every other module is private, under explorer/_src.
FACES = {"explorer", "explorer.ui", "explorer.cli"}
UI_LIBRARIES = ("ipywidgets", "plotly", "IPython", "voila", "anywidget")
# jax is imported where programs are built and compiled: the compile package (the caller's
# trace and lowering, the workers' compile), the workload programs, and the API's flattening
# of arbitrary pytrees of TensorSpecs.
JAX_ALLOWED = ("compile", "workloads", "api")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the file (absolute names)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    here = name.split(".") if is_pkg else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)   # `from pkg import module`
    return out


MODULES = _modules()
# The top-level package only re-exports the stages (and no stage may import it, see below), so
# it is left out of the graph the cycle search walks.
GRAPH = {name: {m for m in _imports(name, path) if m in MODULES and m not in (name, "explorer")}
         for name, path in MODULES.items()}


def _stage(module: str) -> str:
    """A private module's stage (explorer._src.<stage>...); "face" for the public faces."""
    parts = module.split(".")
    if parts[1:2] == ["_src"]:
        return parts[2] if len(parts) > 2 else "errors"   # explorer._src itself: a docstring
    return "face"


def test_every_module_but_the_faces_is_private():
    public = {m for m in MODULES if m.split(".")[1:2] != ["_src"]}
    assert public == FACES


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_face_only_re_exports(face):
    """A face imports names from the private modules and defines nothing of its own."""
    tree = ast.parse(MODULES[face].read_text())
    defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert defined == []
    imported = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert imported and all(m.startswith("explorer._src") for m in imported), imported


def test_every_stage_is_ranked_and_documented():
    stages = {_stage(m) for m in MODULES}
    assert stages <= set(RANKS), f"unranked stages: {stages - set(RANKS)}"
    packages = [p for p in [PACKAGE, *PACKAGE.iterdir(), *(PACKAGE / "_src").iterdir()]
                if (p / "__init__.py").exists()]
    for package in packages:
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
        assert doc, f"{package}/__init__.py needs a docstring saying what it owns"


def test_no_import_cycle():
    # Tarjan's strongly connected components; a component of more than one module is a cycle.
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == [], f"import cycles: {cycles}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_pipeline(module):
    if module in FACES:
        return                      # a public face re-exports the stages (tested above)
    rank = RANKS[_stage(module)]
    upward = sorted(m for m in GRAPH[module]
                    if m != "explorer" and RANKS[_stage(m)] > rank)
    assert upward == [], f"{module} (stage {_stage(module)}) imports later stages: {upward}"
    assert "explorer" not in _imports(module, MODULES[module]), \
        f"{module} imports the top-level package; import the stage module instead"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_ui_libraries_only_in_the_ui(module):
    if _stage(module) == "ui":
        return
    named = _imports(module, MODULES[module])
    bad = sorted(m for m in named if m.split(".")[0] in UI_LIBRARIES)
    assert bad == [], f"{module} imports UI libraries {bad}; only explorer._src.ui may"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_jax_only_where_programs_are_compiled(module):
    if _stage(module) in JAX_ALLOWED:
        return
    named = _imports(module, MODULES[module])
    bad = sorted(m for m in named if m.split(".")[0] in ("jax", "jaxlib"))
    assert bad == [], f"{module} imports {bad}; only {JAX_ALLOWED} may touch jax"


# jax's private modules (jax._src, the old jax.interpreters.pxla and jax.lib) are reached from
# one module, which checks them against the installed jax when imported.
JAX_PRIVATE_HOME = "explorer._src.compile.jax_private"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_private_jax_only_in_its_one_module(module):
    if module == JAX_PRIVATE_HOME:
        return
    named = _imports(module, MODULES[module])
    bad = sorted(m for m in named if m.startswith(("jax._src", "jax.interpreters", "jax.lib")))
    assert bad == [], f"{module} imports {bad}; private jax goes through {JAX_PRIVATE_HOME}"


def test_the_test_folders_mirror_the_packages():
    tests = Path(__file__).resolve().parent
    packages = {p.name for p in (PACKAGE / "_src").iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders <= packages, f"test folders with no package: {folders - packages}"
