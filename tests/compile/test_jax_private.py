"""The one module of private jax checks the installed jax before anything is compiled: an older
jax, or one that lacks a piece or a parameter the explorer passes, raises one JaxVersionError
naming each; a jax newer than the newest tested is used, with a note."""

import types

import jax
import pytest

from explorer import JaxVersionError
from explorer._src.compile import jax_private
from explorer._src.compile.jax_private import (
    NEWEST_TESTED_JAX,
    OLDEST_JAX,
    PIECES,
    check_jax,
    jax_note,
    version_tuple,
)


@pytest.mark.parametrize(("text", "parts"), [
    ("0.10.2", (0, 10, 2)), ("0.12.0.1", (0, 12, 0, 1)), ("0.13.0.dev20261201", (0, 13, 0)),
    ("0.12.1rc1", (0, 12, 1)), ("1.0", (1, 0))])
def test_version_parts(text, parts):
    assert version_tuple(text) == parts


def test_the_installed_jax_has_every_piece():
    assert jax_private.missing_pieces() == []
    check_jax(jax.__version__)        # raises nothing


def test_an_older_jax_is_refused_with_the_floor_and_the_fix():
    with pytest.raises(JaxVersionError) as e:
        check_jax("0.9.2")
    assert "jax 0.9.2 is installed" in str(e.value)
    assert f"jax {OLDEST_JAX} or newer" in str(e.value)
    assert f"pip install 'jax>={OLDEST_JAX}'" in str(e.value)


def _lookup_without(module: str, name: str):
    """A module lookup over the installed jax in which `module.name` is absent."""
    import importlib

    def lookup(mod):
        real = importlib.import_module(mod)
        if mod != module:
            return real
        return types.SimpleNamespace(**{k: v for k, v in vars(real).items() if k != name})
    return lookup


def test_a_jax_without_a_piece_names_it_and_what_it_is_for():
    lookup = _lookup_without("jax._src.interpreters.pxla", "MeshComputation")
    with pytest.raises(JaxVersionError) as e:
        check_jax("0.13.0", lookup)
    message = str(e.value)
    assert "jax 0.13.0 is installed and lacks 1 of the private pieces" in message
    assert "jax._src.interpreters.pxla.MeshComputation (the caller's module compiled" in message
    assert f"pip install 'jax=={NEWEST_TESTED_JAX}'" in message


def test_a_changed_signature_names_the_missing_parameter():
    import importlib

    real = importlib.import_module("jax._src.stages")

    class Lowered:                                  # a release that renamed out_types
        def __init__(self, lowering, args_info, out_tree, no_kwargs, in_types, result_types):
            pass

    def lookup(mod):
        if mod == "jax._src.stages":
            return types.SimpleNamespace(Lowered=Lowered, make_args_info=real.make_args_info)
        return importlib.import_module(mod)

    assert jax_private.missing_pieces(lookup) == [
        "jax._src.stages.Lowered with parameters out_types (the caller's module compiled over "
        "the worker's devices as jax.jit would)"]


def test_every_piece_says_what_it_is_for():
    assert all(p.used_for for p in PIECES)
    assert len({p.path for p in PIECES}) == len(PIECES)


def test_a_newer_jax_is_noted_an_older_tested_one_is_not():
    assert jax_note(NEWEST_TESTED_JAX) == ""
    assert jax_note(OLDEST_JAX) == ""
    note = jax_note("0.13.0")
    assert "jax 0.13.0, newer than the newest" in note and NEWEST_TESTED_JAX in note
