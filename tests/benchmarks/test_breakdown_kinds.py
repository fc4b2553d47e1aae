"""``benchmarks/breakdown.py`` puts each kernel a GPU step launches (or operator a CPU step
calls) under the kind it belongs to, by name: the names below take the forms PyTorch's profiler
writes for cuDNN's and flash's attention, cuBLAS's matmuls, fused AdamW (PyTorch's, and the
compiled update's one kernel), Inductor's kernels, copies and ATen's element-wise kernels
(cuDNN's attention names "sdpa" beside "wgmma", so attention is tried first), so that a GPU
run's figures land where the breakdown says."""

from __future__ import annotations

import pytest

from benchmarks.breakdown import kind_of, summarize
from benchmarks.common.idle import device_idle

NAMES = {
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_7_64x128x64_4x1x1_kernel0_0": "attention",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false>, true>": "attention",
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>": "attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT": "matmul",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off": "matmul",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>": "matmul",
    "aten::mm": "matmul",
    "aten::addmm": "matmul",
    "void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor<float, 4>>": "optimizer",
    "aten::_fused_adamw_": "optimizer",
    "triton_poi_fused_add_copy_copy__div_fma_lerp_mul_select_sqrt_sub_0": "optimizer",  # the compiled update
    "triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0": "compiled",
    "triton_poi_fused_mul_silu_1": "compiled",
    "Memcpy HtoD (Pageable -> Device)": "copy",
    "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda>": "copy",
    "aten::copy_": "copy",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MaxOps<float>>>": "element-wise",
    "void at::native::elementwise_kernel<128, 2, AUnaryFunctor<float, float, MulFunctor<float>>>": "element-wise",
    "aten::mul": "element-wise",
    "void at::native::embedding_backward_feature_kernel<float, float, long>": "other",
}


@pytest.mark.parametrize("name", NAMES)
def test_each_kernel_or_operator_lands_under_its_kind(name):
    assert kind_of(name) == NAMES[name]


def test_a_step_is_summed_by_kind_and_its_longest_are_listed():
    times = [("aten::mm", 0.5), ("aten::mm", 0.25), ("aten::mul", 0.125), ("triton_poi_fused_0", 0.0625)]
    out = summarize(times, step_s=1.0)
    assert out["busy_s"] == 0.9375 and out["calls"] == 4 and out["step_s"] == 1.0
    assert out["by_kind"] == {"matmul": 0.75, "element-wise": 0.125, "compiled": 0.0625}
    assert out["top"][0] == ["aten::mm", 0.75, 2]


def test_the_device_s_idle_time_is_the_gaps_between_kernels_and_the_host_ranges_open_then_are_named():
    """A step from 0 to 10 s: kernels (overlapping ones too) leave the device idle 0-1, 4-6 and
    9-10 (a 50 us gap is a launch's latency, not idle); the host was collating during the first
    gap, in the update during the last, and in a forward pass across the middle one."""
    kernels = [(1.0, 3.0), (2.0, 4.0), (6.0, 7.0), (7.00005, 9.0)]
    host = [("hotswitch.inputs", 0.0, 1.5), ("hotswitch.forward", 3.5, 5.0), ("hotswitch.forward", 5.5, 8.0)]
    host += [("hotswitch.update", 8.5, 10.0), ("aten::item", 9.5, 9.75)]
    idle = device_idle(kernels, host, (0.0, 10.0))
    assert idle["gaps"] == 3 and idle["idle_s"] == 4.0
    assert idle["during"] == [
        ["hotswitch.forward", 1.5], ["hotswitch.inputs", 1.0], ["hotswitch.update", 1.0], ["aten::item", 0.25]
    ]  # fmt: skip
