"""The sentence that says which compiler wrote a Report's program (report/provenance.py), on
the shared Megatron MLP report with its backend fields set as each kind of compile sets them;
and the jax and compiler versions a real compile records."""

from dataclasses import replace
from importlib import metadata

import jax

from explorer._src.report.provenance import compiled_by, compiled_with, provenance


def test_a_gpu_compile_ahead_of_time_names_the_gpus_and_the_compiler(megatron):
    r = replace(megatron, backend="gpu", device_kind="NVIDIA H100 80GB HBM3", ahead_of_time=True,
                approximation="", jax_version="0.12.0.1", compiler="jax-cuda12-plugin 0.12.0.1")
    assert provenance(r) == ("compiled for 8 × NVIDIA H100 80GB HBM3 by XLA's GPU compiler "
                             "(no GPU needed)")
    assert compiled_with(r) == "jax 0.12.0.1, compiler jax-cuda12-plugin 0.12.0.1"


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


def test_a_compile_records_the_jax_and_the_compiler_that_wrote_it(megatron):
    # This process's jax lowered it and a worker of the same environment compiled it with
    # XLA's CPU compiler, which ships in jaxlib.
    assert megatron.jax_version == jax.__version__
    assert megatron.compiler == f"jaxlib {metadata.version('jaxlib')}"
    assert compiled_with(megatron) == (f"jax {jax.__version__}, compiler jaxlib "
                                       f"{metadata.version('jaxlib')}")
    assert compiled_with(replace(megatron, jax_version="", compiler="")) == ""
    mesh = megatron.to_dict()["mesh"]
    assert (mesh["jax"], mesh["compiler"]) == (jax.__version__,
                                               f"jaxlib {metadata.version('jaxlib')}")
