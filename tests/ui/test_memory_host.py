"""The Memory tab's words for offloaded memory, on Reports built by hand: the host's bytes apart
from the device's, which inputs are offloaded, and the compiler's note where it could not
offload what was asked."""

from explorer._src.report.report import Cost, Memory, Report, TensorInfo, TensorRole, Timing
from explorer._src.spec.mesh import parse_mesh
from explorer._src.ui.memory import memory_html

MiB = 2 ** 20


def report(memory, tensors=(), notes=()):
    return Report(parse_mesh("data=4"), "shardy", "tpu v5p:2x2x1", (), tuple(tensors), memory,
                  Cost(None, None, None, 0), Timing(0.0, 0.0), notes=tuple(notes))


def tensor(name, memory_kind):
    return TensorInfo(name, TensorRole.INPUT, (1024, 1024), "float32", "{devices=[4,1]<=[4]}",
                      ("data", None), (256, 1024), 1, MiB, memory_kind=memory_kind)


def test_offloaded_bytes_are_said_apart_from_the_device_total_with_the_inputs_named():
    m = Memory(arguments=256 * 1024, outputs=0, aliased=0, temporaries=4096, generated_code=0,
               host_arguments=MiB, host_outputs=MiB)
    text = memory_html(report(m, [tensor("w", "pinned_host"), tensor("x", "device")]))
    assert "In host memory</b> (offloaded (w); not counted against the device's)" in text
    # 1 MiB in + 1 MiB out = 2 MiB per device on the host; the device's total leaves it out.
    assert "= <b>2.0 MiB</b> per device" in text
    assert "<b>total 260.0 KiB</b>" in text      # 256 KiB of x + 4 KiB of temporaries


def test_no_offload_says_nothing_of_host_memory():
    m = Memory(arguments=MiB, outputs=MiB, aliased=0, temporaries=0, generated_code=0)
    assert "host memory" not in memory_html(report(m))


def test_a_compile_that_could_not_offload_its_inputs_says_so_in_the_tab():
    note = ("the inputs w were asked to live in host memory, but jax gives the gpu devices of "
            "this compile no host memory space for inputs")
    m = Memory(arguments=MiB, outputs=MiB, aliased=0, temporaries=0, generated_code=0)
    assert note in memory_html(report(m, notes=[note]))
