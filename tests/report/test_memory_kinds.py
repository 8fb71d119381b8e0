"""report/memory.py's split of memory by tensor kind, on a Report built by hand: which inputs
and outputs count as params, optimizer state or other, where the gradients are found, and when
they are said to be not located. (tests/report/test_memory.py checks the split on compiled
workloads.)"""

import json

from explorer._src.report.memory import gradients, kinds_by_name, memory_kinds
from explorer._src.report.report import (
    MEMORY_KINDS,
    Cost,
    Memory,
    MemoryKind,
    Report,
    TensorInfo,
    TensorRole,
    Timing,
)
from explorer._src.spec.mesh import parse_mesh

KiB = 1024


def tensor(name, kind, nbytes, op_name=""):
    return TensorInfo(name, kind, (nbytes // 4,), "float32", "{replicated}", (None,),
                      (nbytes // 4,), 8, nbytes, op_name=op_name)


def report(*tensors, temporaries=0):
    return Report(parse_mesh("data=8"), "shardy", "cpu", (), tensors,
                  Memory(arguments=0, outputs=0, aliased=0, temporaries=temporaries,
                         generated_code=0),
                  Cost(None, None, None, 0), Timing(0.0, 0.0))


IN, OUT, MID = TensorRole.INPUT, TensorRole.OUTPUT, TensorRole.INTERMEDIATE

# A training step's tensors: a weight w (8 KiB) and its Adam moment m.w (8 KiB), a batch x
# (1 KiB); its outputs: the new w and m.w under their names, a loss (4 bytes); the gradient of
# w pinned at the constraint point grad.w (8 KiB), and an intermediate of no kind.
STEP = report(
    tensor("w", IN, 8 * KiB), tensor("m.w", IN, 8 * KiB), tensor("x", IN, KiB),
    tensor("out.w", OUT, 8 * KiB), tensor("out.m.w", OUT, 8 * KiB),
    tensor("out.loss", OUT, 4),
    tensor("grad_w", MID, 8 * KiB, op_name="jit(step)/grad.w/sharding_constraint"),
    tensor("h", MID, 2 * KiB, op_name="jit(step)/dot_general"),
    temporaries=3 * KiB)
KINDS = {"w": "param", "m.w": "opt", "x": "input"}


def test_inputs_and_the_outputs_named_like_them_count_by_the_inputs_kind():
    kinds = memory_kinds(STEP, KINDS, has_grads=True)
    # params: w in and out, 2 · 8 KiB; optimizer: m.w in and out, 2 · 8 KiB.
    assert kinds["params"] == 16 * KiB and kinds["optimizer"] == 16 * KiB
    # other: the batch (1 KiB) and the loss (4 bytes), which names no input.
    assert kinds["other"] == KiB + 4


def test_the_gradients_are_the_tensors_pinned_at_grad_points_and_activations_the_temporaries():
    kinds = memory_kinds(STEP, KINDS, has_grads=True)
    assert kinds["grads"] == 8 * KiB
    assert kinds["activations"] == 3 * KiB          # XLA's temporaries, whatever they hold
    assert list(gradients(STEP.tensors)) == ["grad.w"]


def test_unnamed_inputs_are_params_as_a_workload_without_kinds_says():
    kinds = memory_kinds(STEP, {}, has_grads=False)
    # w, m.w and x in and the two named outputs: all params; only the loss is other.
    assert kinds["params"] == 8 * KiB + 8 * KiB + KiB + 8 * KiB + 8 * KiB
    assert (kinds["optimizer"], kinds["other"]) == (0, 4)


def test_gradients_a_program_should_have_but_does_not_pin_are_not_located():
    no_points = report(*(t for t in STEP.tensors if not t.op_name.endswith("constraint")),
                       temporaries=3 * KiB)
    assert memory_kinds(no_points, KINDS, has_grads=True)["grads"] is None
    # A program with no gradient points at all (inference) has none: 0, not unknown.
    assert memory_kinds(no_points, KINDS, has_grads=False)["grads"] == 0


def test_a_gradient_point_seen_twice_counts_once():
    # XLA may keep two instructions from one constraint point (a copy of the pinned value).
    twice = report(tensor("g1", MID, 8 * KiB, op_name="jit(step)/grad.w/sharding_constraint"),
                   tensor("g2", MID, 8 * KiB, op_name="jit(step)/grad.w/sharding_constraint"))
    assert [t.name for t in gradients(twice.tensors).values()] == ["g1"]
    assert memory_kinds(twice, {}, has_grads=True)["grads"] == 8 * KiB


# --------------------------------------------------------- a user's own step, by its names

def test_a_users_inputs_are_params_and_optimizer_state_by_their_names_or_arguments():
    names = {"model.blocks.0.w": "model", "optimizer.mu.blocks.0.w": "optimizer", "x": "batch"}
    kinds = kinds_by_name(names)
    assert {n: kinds[n] for n in names} == {
        "model.blocks.0.w": "param", "optimizer.mu.blocks.0.w": "opt", "x": "input"}
    # Unprefixed leaves take their argument's name: params and opt_state.
    kinds = kinds_by_name({"w": "params", "mu.w": "opt_state", "tokens": "tokens"})
    assert (kinds["w"], kinds["mu.w"], kinds["tokens"]) == ("param", "opt", "input")
    # ... and their outputs named by argument and leaf find them (`out.params.w`).
    assert (kinds["params.w"], kinds["opt_state.mu.w"]) == ("param", "opt")
    # Nothing recognised: no split (every byte stays other).
    assert kinds_by_name({"x": "x", "w": "w"}) is None


# A user's step(model, optimizer, batch) -> (model, optimizer, loss), model and optimizer
# donated: the module aliases output 0 to parameter 0 and output 1 to parameter 1.
DONATED_HEADER = ("HloModule step, input_output_alias={ {0}: (0, {}, may-alias), "
                  "{1}: (1, {}, may-alias) }\n")
USER_STEP = Report(
    parse_mesh("data=8"), "shardy", "cpu", (), (
        tensor("model.w", IN, 8 * KiB), tensor("optimizer.mu.w", IN, 8 * KiB),
        tensor("batch", IN, KiB),
        tensor("out.0.w", OUT, 8 * KiB), tensor("out.1.mu.w", OUT, 8 * KiB),
        tensor("out.2", OUT, 4)),
    Memory(arguments=17 * KiB, outputs=16 * KiB + 4, aliased=16 * KiB, temporaries=0,
           generated_code=0),
    Cost(None, None, None, 0), Timing(0.0, 0.0), optimized_hlo=DONATED_HEADER)


def test_a_users_donated_train_step_counts_its_state_once_by_kind():
    names = {"model.w": "model", "optimizer.mu.w": "optimizer", "batch": "batch"}
    kinds = memory_kinds(USER_STEP, kinds_by_name(names), has_grads=False)
    # The donated outputs are their inputs' buffers, counted once: 8 KiB each.
    assert kinds[MemoryKind.PARAMS] == 8 * KiB and kinds[MemoryKind.OPTIMIZER] == 8 * KiB
    assert kinds[MemoryKind.OTHER] == KiB + 4                   # the batch and the loss
    m = Memory(**{**USER_STEP.memory.__dict__, "kinds": kinds})
    assert sum(m.by_kind[k] for k in ("params", "optimizer", "activations", "other")) == m.total


def test_memory_kinds_are_strings_to_json_and_to_comparisons():
    kinds = memory_kinds(STEP, KINDS, has_grads=True)
    assert set(kinds) == set(MemoryKind) and all(isinstance(k, MemoryKind) for k in kinds)
    assert json.loads(json.dumps(kinds)) == {
        "params": 16 * KiB, "grads": 8 * KiB, "optimizer": 16 * KiB, "activations": 3 * KiB,
        "other": KiB + 4}
    assert MemoryKind("optimizer") is MemoryKind.OPTIMIZER and MemoryKind.OPTIMIZER == "optimizer"
    assert MEMORY_KINDS == ("params", "grads", "optimizer", "activations", "other")
