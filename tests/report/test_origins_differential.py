"""The origins the explorer reports agree with Shardy's own record, over random programs.

Each program is a random chain of element-wise ops, matmuls, reshapes, transposes and
sharding constraints on inputs with random specs, generated here from a seeded RNG. The
explorer analyzes it; plain jax compiles the same program in a subprocess with Shardy's dump on,
and a few regular expressions here (not the explorer's reader) take `sdy.sharding_origins` from
its module. For every input and the output, each dimension's mesh axes and where each came from
must be the same; over the intermediates, the set of (shape, dimension, axis, origin) must be."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import explorer
from explorer import OriginKind
from explorer import TensorSpec as T

SEED = 2024
PROGRAMS = 60
MESH = "data=2,model=4"
AXES = ("data", "model")
SIZES = (8, 16, 32)
UNARY = ("tanh", "sin", "exp", "negative")
BINARY = ("add", "multiply")


# --- the programs -------------------------------------------------------------------------------

def _spec(rng, rank: int) -> list[str | None]:
    """A random spec: each dimension whole or over one mesh axis, no axis twice."""
    free = list(AXES)
    out = []
    for _ in range(rank):
        choice = rng.integers(len(free) + 1)      # whole as likely as each free axis
        if choice < len(free):
            out.append(free.pop(choice))
        else:
            out.append(None)
    return out


def random_program(rng) -> dict:
    """{"inputs": [[shape, spec], ...], "steps": [...]}: the values are the steps' results in
    order; a step reads earlier values by number; the last value is the output."""
    inputs: list = []
    steps: list = []
    shapes: list = []

    def new_input(shape):
        inputs.append([list(shape), _spec(rng, len(shape))])
        steps.append(["input", len(inputs) - 1])
        shapes.append(tuple(shape))
        return len(shapes) - 1

    new_input((int(rng.choice(SIZES)), int(rng.choice(SIZES))))
    for _ in range(int(rng.integers(3, 9))):
        i = int(rng.integers(len(shapes)))
        a, b = shapes[i]
        kind = rng.choice(["unary", "binary", "dot", "transpose", "reshape", "constraint"])
        if kind == "unary":
            steps.append(["unary", i, str(rng.choice(UNARY))])
            shapes.append((a, b))
        elif kind == "binary":
            same = [j for j, s in enumerate(shapes) if s == (a, b) and j != i]
            j = int(rng.choice(same)) if same and rng.random() < 0.5 else new_input((a, b))
            steps.append(["binary", i, j, str(rng.choice(BINARY))])
            shapes.append((a, b))
        elif kind == "dot":
            j = new_input((b, int(rng.choice(SIZES))))
            steps.append(["dot", i, j])
            shapes.append((a, shapes[j][1]))
        elif kind == "transpose":
            steps.append(["transpose", i])
            shapes.append((b, a))
        elif kind == "reshape":
            shape = (a // 2, b * 2) if rng.random() < 0.5 else (a * 2, b // 2)
            steps.append(["reshape", i, list(shape)])
            shapes.append(shape)
        else:
            steps.append(["constraint", i, _spec(rng, 2)])
            shapes.append((a, b))
    return {"inputs": inputs, "steps": steps}


def run(program: dict, xs):
    """The program on arrays `xs` (its inputs, in order)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    values = []
    for step in program["steps"]:
        kind = step[0]
        if kind == "input":
            values.append(xs[step[1]])
        elif kind == "unary":
            values.append(getattr(jnp, step[2])(values[step[1]]))
        elif kind == "binary":
            values.append(getattr(jnp, step[3])(values[step[1]], values[step[2]]))
        elif kind == "dot":
            values.append(values[step[1]] @ values[step[2]])
        elif kind == "transpose":
            values.append(values[step[1]].T)
        elif kind == "reshape":
            values.append(values[step[1]].reshape(step[2]))
        else:
            values.append(jax.lax.with_sharding_constraint(values[step[1]], P(*step[2])))
    return values[-1]


def program_function(program: dict):
    def program_fn(*xs):
        return run(program, xs)

    return program_fn


def input_names(program: dict) -> list[str]:
    return [f"x{k}" for k in range(len(program["inputs"]))]


# --- Shardy's record, read here -----------------------------------------------------------------

_ARG = re.compile(r"(%arg\d+): tensor<([^>]*)> \{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")
_SPLIT = re.compile(r"\[((?:\{[^{}]*\}(?:, )?)*)\]")
# An origin's key is an axis, or a sub-axis written inside its quotes: "model:(1)2".
_ORIGIN = re.compile(r'"?([\w:()]+)"? = "([^"]*)"')


def _dims(type_text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in type_text.split("x")[:-1])


def _split(sharding: str) -> list[list[str]]:
    """`#sdy.sharding<@mesh, [{"data"}, {}]>` -> [["data"], []] (the first such sharding in
    an attribute list, after its propagation edges)."""
    sharding = sharding.split("sdy.sharding = ", 1)[-1]
    body = _SPLIT.search(sharding).group(1)
    # A sub-axis is written `"model":(1)2` in a sharding.
    return [[name + part for name, part in re.findall(r'"(\w+)"(:\(\d+\)\d+)?', d)]
            for d in re.findall(r"\{([^{}]*)\}", body)]


def _label(text: str, names: list[str], own: str) -> str:
    """Shardy's origin as the comparison names it: `input x1`, `constraint`, `output`."""
    if text == "self":
        return own
    if m := re.fullmatch(r"input: (\d+)", text):
        return f"input {names[int(m.group(1))]}"
    if re.fullmatch(r"constraint_\d+", text):
        return "constraint"
    if re.fullmatch(r"output: \d+", text):
        return "output"
    return text


def _entries(split, origins: dict, names, own) -> set:
    return {(d, axis, _label(origins[axis], names, own))
            for d, axes in enumerate(split) for axis in axes}


def shardy_record(mlir: str, names: list[str]) -> dict:
    """From the text: each argument's and the result's (dim, axis, origin) entries, and the
    set of (shape, dim, axis, origin) over the ops' results."""
    header = next(line for line in mlir.splitlines() if "func.func @main" in line)
    args = []
    for k, (_, _, attrs) in enumerate(_ARG.findall(header)):
        split = _split(attrs)
        origins = dict(_ORIGIN.findall(attrs.split("sdy.sharding_origins", 1)[1])) \
            if "sdy.sharding_origins" in attrs else {}
        args.append(sorted(_entries(split, origins, names, f"input {names[k]}")))
    result_attrs = header.split(") -> (", 1)[1] if ") -> (" in header else ""
    result = []
    if "sdy.sharding_origins" in result_attrs:
        origins = dict(_ORIGIN.findall(result_attrs.split("sdy.sharding_origins", 1)[1]
                                       .split("}", 1)[0]))
        result = sorted(_entries(_split(result_attrs), origins, names, "output"))
    ops = set()
    for line in mlir.splitlines():
        m = re.match(r"\s*%\d+ = (\S+) .*sdy.sharding_per_value<\[(<@mesh, \[.*?\]>)\]>.*"
                     r"sdy.sharding_origins = \[\{([^}]*)\}\].*: (?:\(.*\) -> )?tensor<([^>]*)>$",
                     line)
        if m:
            own = "constraint" if m.group(1) in ("sdy.reshard", "sdy.sharding_constraint") \
                else "?"
            ops |= {(_dims(m.group(4)),) + e for e in _entries(
                _split(m.group(2)), dict(_ORIGIN.findall(m.group(3))), names, own)}
        m = re.match(r'\s*%\d+ = sdy.reshard %\S+ (<@mesh, \[.*?\]>) .*sdy.sharding_origins = '
                     r'\{([^}]*)\}.*: tensor<([^>]*)>$', line)
        if m:
            ops |= {(_dims(m.group(3)),) + e for e in _entries(
                _split(m.group(1)), dict(_ORIGIN.findall(m.group(2))), names, "constraint")}
    return {"args": args, "result": result, "ops": sorted(ops)}


# --- plain jax, in a subprocess -----------------------------------------------------------------

_PLAIN_JAX = r"""
import glob, importlib.util, json, os, sys, tempfile
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
spec = importlib.util.spec_from_file_location("differential", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
out = []
for program in json.load(sys.stdin):
    structs = [jax.ShapeDtypeStruct(tuple(s), np.float32,
                                    sharding=NamedSharding(mesh, P(*p)))
               for s, p in program["inputs"]]
    with tempfile.TemporaryDirectory() as d, jax.set_mesh(mesh):
        jax.jit(mod.program_function(program), keep_unused=True).lower(*structs).compile(
            compiler_options={
            "xla_dump_to": d, "xla_dump_hlo_pass_re": "shardy-verbose"})
        [path] = glob.glob(os.path.join(d, "shardy", "*", "02.after_propagation.mlir"))
        with open(path) as f:
            out.append(mod.shardy_record(f.read(), mod.input_names(program)))
print(json.dumps(out))
"""


def plain_jax_records(programs: list[dict]) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", _PLAIN_JAX, os.path.abspath(__file__)],
                          input=json.dumps(programs), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


# --- the explorer's reading ---------------------------------------------------------------------

def _explorer_label(o, own_name: str) -> str:
    if o.kind is OriginKind.INPUT:
        return f"input {o.name}"
    if o.kind is OriginKind.CONSTRAINT:
        return "constraint"
    if o.kind is OriginKind.OUTPUT:
        return "output"
    return o.shardy


def explorer_entries(t) -> list[tuple]:
    return sorted((d.dim, o.axis, _explorer_label(o, t.name))
                  for d in t.origins.dims for o in d.axes)


@pytest.mark.slow
def test_reported_origins_agree_with_shardys_record_over_random_programs():
    rng = np.random.default_rng(SEED)
    programs = [random_program(rng) for _ in range(PROGRAMS)]
    records = plain_jax_records(programs)
    with_intermediates = 0
    for n, (program, record) in enumerate(zip(programs, records, strict=True)):
        names = input_names(program)
        specs = [T(name, tuple(shape), spec=",".join(str(p) for p in spec))
                 for name, (shape, spec) in zip(names, program["inputs"], strict=True)]
        r = explorer.analyze(program_function(program), *specs, mesh=MESH, origins=True)
        where = f"program {n}: {program}"
        for name, want in zip(names, record["args"], strict=True):
            assert explorer_entries(r.tensor(name)) == [tuple(e) for e in want], where
        assert explorer_entries(r.tensor("out")) == [tuple(e) for e in record["result"]], where
        ours = {(t.shape,) + e for t in r.tensors if t.kind == "intermediate"
                for e in explorer_entries(t)}
        # The op that makes the output is listed once, as `out` (none where the program
        # returns an input).
        out = {(r.tensor("out").shape,) + e for e in explorer_entries(r.tensor("out"))}
        theirs = {(tuple(e[0]),) + tuple(e[1:]) for e in record["ops"]}
        # Shardy names a value's own origin only for constraints; its other ops' entries are
        # all `input`, `constraint` or `output` ones, which the explorer must report alike.
        assert not {e for e in theirs if e[3] == "?"}, where
        assert ours <= theirs, where
        assert theirs <= ours | out, where
        with_intermediates += bool(ours)
    # Most programs split some intermediate, so that the comparison is not only of inputs.
    assert with_intermediates >= PROGRAMS // 2
