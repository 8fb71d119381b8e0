"""analyze(donate=...): the inputs a step may overwrite, as a training loop donates its state.

Donated inputs are jax.jit's donate_argnums: the compiler writes each output into a donated
input's buffer of its shape, dtype and layout, and its memory analysis counts that buffer once
(`Memory.aliased`). The sizes below are worked out by hand from the shapes; every compile here
is on fake CPU devices (tests/compile/test_donation.py has the GPU and TPU compilers)."""

import pytest

import explorer
from explorer import TensorError, TensorSpec

KiB = 1024
MiB = 1024 * KiB


def sgd(params, grads):
    """One SGD step written as a user would: every parameter minus a tenth of its gradient,
    elementwise, so that each new parameter can be written where its old one was."""
    return {k: params[k] - 0.1 * grads[k] for k in params}


def state():
    # w [512, 256] f32 = 512 KiB, b [256] f32 = 1 KiB, replicated on both devices; the same
    # again as gradients. Both arguments hold a `w` and a `b`, so their leaves are named with
    # the argument in front, in jax's order (keys sorted): params.b, params.w, grads.b, grads.w.
    import jax

    tensors = {"w": jax.ShapeDtypeStruct((512, 256), "float32"),
               "b": jax.ShapeDtypeStruct((256,), "float32")}
    return dict(tensors), dict(tensors)


PARAM_BYTES = 512 * KiB + 1 * KiB


def test_donated_params_are_written_in_place_and_counted_once():
    kept = explorer.analyze(sgd, *state(), mesh="data=2")
    donated = explorer.analyze(sgd, *state(), mesh="data=2", donate=r"^params\.")
    # Arguments: params and grads, 513 KiB each; outputs: the new params, 513 KiB, and the
    # CPU's tuple of the two outputs (two 8-byte pointers).
    for r in (kept, donated):
        assert (r.memory.arguments, r.memory.outputs) == (2 * PARAM_BYTES, PARAM_BYTES + 16)
    # Donated, the new w and b take the old ones' buffers: all 513 KiB of the params alias.
    assert kept.memory.aliased == 0
    assert donated.memory.aliased == PARAM_BYTES
    # An elementwise update needs no temporary either way, so one device holds the params
    # once less: 3 x 513 KiB kept, 2 x 513 KiB donated.
    assert kept.memory.temporaries == donated.memory.temporaries == 0
    assert kept.memory.total - donated.memory.total == PARAM_BYTES
    assert not [n for n in donated.notes if "donated" in n]


def test_a_donated_input_no_output_can_take_is_named_in_the_notes():
    def loss(w, x):          # a scalar out: no output has w's shape
        return (x * w).sum()

    r = explorer.analyze(loss, TensorSpec("w", (64, 64)), TensorSpec("x", (64, 64)),
                         mesh="data=2", donate=["w"])
    assert r.memory.aliased == 0
    assert [n for n in r.notes if n.startswith("the donated input w: no output has its shape")]


def test_a_pattern_that_names_no_input_is_refused_with_the_inputs_named():
    with pytest.raises(TensorError, match=r"donate pattern 'opt' names no input; the inputs "
                                          r"are 'params.b', 'params.w', 'grads.b', 'grads.w'"):
        explorer.analyze(sgd, *state(), mesh="data=2", donate=["^params", "opt"])


@pytest.mark.parametrize("donate, message", [
    ("(", r"donate pattern '\(' is not a regular expression"),
    ([3], r"donate pattern 3 is not a regular expression"),
    (True, r"donate=True is not a regular expression or a list of them"),
])
def test_a_malformed_donation_is_refused_before_any_compile(donate, message):
    with pytest.raises(TensorError, match=message):
        explorer.analyze(sgd, *state(), mesh="data=2", donate=donate, cache_only=True)


def test_a_donation_is_part_of_the_cache_key():
    def step(w, g):
        return w - 0.5 * g

    w, g = TensorSpec("w", (128, 128)), TensorSpec("g", (128, 128))
    explorer.analyze(step, w, g, mesh="data=2")
    # The undonated compile does not answer the donated request, nor the other way round.
    assert explorer.analyze(step, w, g, mesh="data=2", donate="w", cache_only=True) is None
    donated = explorer.analyze(step, w, g, mesh="data=2", donate="w")
    assert donated.memory.aliased == 128 * 128 * 4             # w's 64 KiB
    again = explorer.analyze(step, w, g, mesh="data=2", donate="w", cache_only=True)
    assert again.timing.cached and again.memory.aliased == 128 * 128 * 4
    assert explorer.analyze(step, w, g, mesh="data=2", cache_only=True).memory.aliased == 0


def test_a_train_workload_donates_its_state_by_default_and_not_with_donate_state_false():
    # mlp_train under dp on data=2: w1 [1024, 4096] and w2 [4096, 1024] f32 replicated, 16 MiB
    # each; x [256, 1024] f32 split over data, 512 KiB a device. It returns the new w1 and w2.
    on = explorer.analyze_workload("mlp_train", "data=2", preset="dp")
    off = explorer.analyze_workload("mlp_train", "data=2", preset="dp",
                                    params={"donate_state": "false"})
    assert on.memory.aliased == 32 * MiB          # both weights written in place
    assert off.memory.aliased == 0
    # By kind, the params count once when donated (the new weights are the old buffers);
    # undonated, the new weights (returned as a tuple, out.0 and out.1, so not named like
    # the inputs) are `other` beside x.
    assert on.memory.by_kind["params"] == off.memory.by_kind["params"] == 32 * MiB
    assert on.memory.by_kind["other"] == 512 * KiB
    assert off.memory.by_kind["other"] == 512 * KiB + 32 * MiB
    assert on.workload.params["donate_state"] == "true"


def test_an_explicit_donation_overrides_the_workloads_own():
    r = explorer.analyze_workload("mlp_train", "data=2", preset="dp", donate="^w1$")
    assert r.memory.aliased == 16 * MiB           # w1 only
