"""report/memory.py's split of memory by tensor kind, on a Report built by hand: which inputs
and outputs count as params, optimizer state or other, where the gradients are found, and when
they are said to be not located. (tests/report/test_memory.py checks the split on compiled
workloads.)"""

from explorer._src.report.memory import gradients, memory_kinds
from explorer._src.report.report import Cost, Memory, Report, TensorInfo, TensorRole, Timing
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
    tensor("out['w']", OUT, 8 * KiB), tensor("out['m.w']", OUT, 8 * KiB),
    tensor("out['loss']", OUT, 4),
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
