"""The sentence that says which compiler wrote a Report's program (report/provenance.py), on
the shared Megatron MLP report with its backend fields set as each kind of compile sets them."""

from dataclasses import replace

from explorer._src.report.provenance import compiled_by, provenance


def test_a_gpu_compile_ahead_of_time_names_the_gpus_and_the_compiler(megatron):
    r = replace(megatron, backend="gpu", device_kind="NVIDIA H100 80GB HBM3", ahead_of_time=True,
                approximation="")
    assert provenance(r) == ("compiled for 8 × NVIDIA H100 80GB HBM3 by XLA's GPU compiler "
                             "(no GPU needed)")


def test_a_tpu_compile_ahead_of_time_names_the_slice(megatron):
    r = replace(megatron, backend="tpu v5e:2x4", device_kind="TPU v5 lite", ahead_of_time=True)
    assert compiled_by(r) == ("compiled for a v5e:2x4 slice (8 × TPU v5 lite) by the TPU "
                              "compiler, libtpu (no TPU needed)")


def test_this_machines_own_gpus_are_not_said_to_need_no_gpu(megatron):
    r = replace(megatron, backend="gpu", device_kind="NVIDIA H100 80GB HBM3",
                ahead_of_time=False)
    assert compiled_by(r) == "compiled for this machine's 8 NVIDIA H100 80GB HBM3 devices"


def test_a_cpu_compile_priced_on_a_gpu_is_marked_approximate_with_the_reason(megatron):
    # The fixture is the CPU's program priced on h100-8 (compile_for="cpu").
    assert megatron.backend == "cpu" and megatron.estimate.target == "h100-8"
    assert megatron.approximation == "compile_for='cpu' was asked"
    assert provenance(megatron) == (
        "compiled for 8 CPU devices, priced on 8 × H100 SXM: approximate, not the program the "
        "GPU compiler writes (compile_for='cpu' was asked)")


def test_without_a_reason_a_cpu_compile_is_just_that(megatron):
    assert provenance(replace(megatron, approximation="")) == "compiled for 8 CPU devices"
