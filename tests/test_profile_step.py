"""benchmarks/profile_step.py: kernel categories, the busy time of overlapping streams, and a
CPU smoke run of the harness (the GPU profile is a device-session measurement)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import profile_step  # noqa: E402


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("void at::native::batch_norm_collect_statistics_channels_last_kernel<float>", "batchnorm"),
        ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "convolution"),
        (
            "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816dgrad_optimized>",
            "convolution",
        ),
        ("nvjet_tst_128x64_64x8_2x1_v_bz_coopA_TNT", "matmul"),
        ("void at::native::multi_tensor_apply_kernel<FusedSgdMathFunctor>", "optimizer"),
        ("void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>", "copy/cast"),
        (
            "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>",
            "elementwise",
        ),
        ("aten::convolution_backward", "convolution"),
        # Inductor's kernels: named after the ops they fuse, never a convolution.
        ("triton_poi_fused__to_copy_convert_element_type_0", "copy/cast"),
        ("triton_poi_fused_convert_element_type_17", "copy/cast"),
        ("triton_poi_fused_convolution_relu_threshold_backward_3", "elementwise"),
        ("triton_per_fused__native_batch_norm_legit_functional_convolution_5", "batchnorm"),
        ("triton_red_fused_convolution_backward_sum_9", "reduction"),
        ("something_else", "other"),
    ],
)
def test_kernel_names_fall_in_their_category(name: str, expected: str) -> None:
    assert profile_step.category(name) == expected


def test_busy_time_counts_overlapping_kernels_once() -> None:
    result = profile_step.Profile(model_steps=2, wall_us=40.0)
    result.intervals = [("a", 0.0, 10.0), ("b", 5.0, 15.0), ("c", 6.0, 8.0), ("d", 20.0, 25.0)]
    assert result.busy_us == pytest.approx(20.0)
    assert result.by(profile_step.category) == {"other": (4, 27.0)}  # 10 + 10 + 2 + 5
    assert result.per_step(result.wall_us) == 20.0


def test_a_cpu_profile_of_two_runs_side_by_side(capsys) -> None:
    results = profile_step.main(
        ["--device", "cpu", "--width", "4", "--steps", "1", "--methods", "rotnet", "--streams", "2"]
    )
    result = results["rotnet", 2]
    assert result.model_steps == 2 and result.intervals
    spent = sum(end - start for _, start, end in result.intervals)
    assert 0 < result.busy_us <= spent and result.busy_us <= result.wall_us
    assert "convolution" in result.by(profile_step.category)
    assert "rotnet, K = 2: per model step" in capsys.readouterr().out
