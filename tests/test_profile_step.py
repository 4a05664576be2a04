"""benchmarks/profile_step.py: kernel categories, the busy time of overlapping streams, and a
CPU smoke run of the harness (the GPU profile is a device-session measurement)."""

from __future__ import annotations

import csv
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


def test_a_cpu_profile_of_two_runs_side_by_side(capsys, tmp_path) -> None:
    summary = tmp_path / "profiles.csv"
    argv = ["--device", "cpu", "--width", "4", "--steps", "1", "--methods", "rotnet"]
    results = profile_step.main([*argv, "--streams", "2", "--summary-out", str(summary)])
    result = results["rotnet", 2]
    assert result.model_steps == 2 and result.intervals and result.step_mode == "eager"
    spent = sum(end - start for _, start, end in result.intervals)
    assert 0 < result.busy_us <= spent and result.busy_us <= result.wall_us
    assert "convolution" in result.by(profile_step.category)
    assert "rotnet, K = 2: per model step" in capsys.readouterr().out
    # The summary: a total row, then the categories, whose times and shares add up to it.
    rows = list(csv.DictReader(summary.open()))
    assert tuple(rows[0]) == profile_step.SUMMARY_COLUMNS
    total, categories = rows[0], rows[1:]
    assert total["category"] == "total" and float(total["share_pct"]) == 100.0
    assert {row["method"] for row in rows} == {"rotnet"} and {row["k"] for row in rows} == {"2"}
    assert "convolution" in {row["category"] for row in categories}
    parts = sum(float(row["us_per_step"]) for row in categories)
    assert parts == pytest.approx(float(total["us_per_step"]), abs=0.01 * len(categories))
    assert sum(float(row["share_pct"]) for row in categories) == pytest.approx(100, abs=0.1)
    assert float(total["us_per_step"]) == pytest.approx(spent / 2, abs=0.01)


def test_a_summary_appends_under_one_header_and_refuses_other_columns(tmp_path) -> None:
    result = profile_step.Profile(model_steps=2, wall_us=40.0, step_mode="graph")
    result.intervals = [("aten::convolution", 0.0, 10.0), ("sgd", 10.0, 14.0)]
    rows = profile_step.summary_rows(result, {"method": "rotnet", "k": 1})
    assert [(row["category"], row["us_per_step"]) for row in rows] == [
        ("total", 7.0),
        ("convolution", 5.0),
        ("optimizer", 2.0),
    ]
    path = tmp_path / "profiles.csv"
    profile_step.append_summary(path, rows)
    profile_step.append_summary(path, rows)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + 2 * len(rows) and lines.count(lines[0]) == 1
    other = tmp_path / "other.csv"
    other.write_text("method,rate\nrotnet,1\n")
    with pytest.raises(ValueError, match="other.csv has columns"):
        profile_step.append_summary(other, rows)
    assert other.read_text() == "method,rate\nrotnet,1\n"  # untouched
