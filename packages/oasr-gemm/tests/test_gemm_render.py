"""The rendered translation units and the module specs (no compile)."""

from __future__ import annotations

import pytest

from oasr_gemm import _jit, configs
from oasr_jit import parse_arch

#: the architecture the rendered modules are for (rendering needs no GPU)
HOPPER = parse_arch("9.0a")


def _rendered(spec) -> dict:
    """A spec's rendered kernel units (not its binding): file name -> text."""
    return {
        s.name: s.text
        for s in spec.sources
        if getattr(s, "text", None) and not s.name.endswith("_jit_binding.cc")
    }


def _binding(spec) -> str:
    """The text of a spec's one binding unit, ``<module>_jit_binding.cc``; no other unit
    exports."""
    units = {s.name: s.text for s in spec.sources if getattr(s, "text", None)}
    assert not any("TVM_FFI_DLL_EXPORT" in text for text in _rendered(spec).values())
    return units[f"{spec.name}_jit_binding.cc"]


def test_one_unit_per_config_and_dtype_with_the_config_baked_in():
    c = configs.GemmConfig(64, 128, 64, 2, 1, "pingpong")
    spec = _jit.gen_gemm_module("oasr_gemm_test", [c, configs.DEFAULT])
    rendered = _rendered(spec)
    assert sorted(rendered) == sorted(
        f"gemm_{d}_{x.id}.cu" for d in ("fp16", "bf16") for x in (c, configs.DEFAULT)
    )
    text = rendered[f"gemm_bf16_{c.id}.cu"]
    assert "Sm90Gemm<cutlass::bfloat16_t, 64, 128, 64," in text
    assert "2, 1, false,\n" in text  # cluster 2 x 1, ping-pong
    assert "oasr::gemm::IdentityAct, false>;" in text  # the plain GEMM: no activation, no C
    assert f'check_c_matches(c, false, "gemm_bf16_{c.id}", "gemm_bf16_{c.id}_c");' in text
    assert f"\nvoid gemm_bf16_{c.id}(TensorView out," in text
    export = f"TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm_bf16_{c.id}, gemm_bf16_{c.id});"
    assert export in _binding(spec)
    assert '"t128x128x64_c1x1_pp"' in rendered[f"gemm_fp16_{configs.DEFAULT.id}.cu"]


def test_each_activation_is_compiled_into_its_own_units():
    c = configs.DEFAULT
    spec = _jit.gen_gemm_module("oasr_gemm_test", [c], ("fp16",), activation="gelu_tanh")
    rendered = _rendered(spec)
    assert list(rendered) == [f"gemm_gelu_tanh_fp16_{c.id}.cu"]
    text = rendered[f"gemm_gelu_tanh_fp16_{c.id}.cu"]
    assert "oasr::gemm::GeluTanhAct, false>;" in text
    assert f'"gelu_tanh_{c.id}"' in text  # the variant named in errors
    function = f"gemm_gelu_tanh_fp16_{c.id}"
    assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({function}, {function});" in _binding(spec)
    with pytest.raises(ValueError, match="no epilogue"):
        _jit.function_name(c, "fp16", "tanh")


def test_kernels_that_add_a_matrix_c_are_units_of_their_own():
    c = configs.DEFAULT
    spec = _jit.gen_gemm_module("oasr_gemm_test", [c], ("fp16",), "swish", with_c=True)
    rendered = _rendered(spec)
    assert list(rendered) == [f"gemm_swish_fp16_{c.id}_c.cu"]
    text = rendered[f"gemm_swish_fp16_{c.id}_c.cu"]
    assert "oasr::gemm::SwishAct, true>;" in text
    assert f'"swish_{c.id}_c"' in text  # the variant named in errors
    assert f'"gemm_swish_fp16_{c.id}_c", "gemm_swish_fp16_{c.id}");' in text
    # the sm80 lane's kernels take C at run time: one name either way, no with-C unit
    sm80 = configs.Sm80Config(64, 64, 64, 32, 32, 4)
    assert _jit.function_name(sm80, "fp16", "swish", True) == f"gemm_swish_fp16_{sm80.id}"
    tuned = _jit.gen_config_module(sm80, "fp16", with_c=True)
    assert tuned.name == f"oasr_gemm_fp16_{sm80.id}"
    with pytest.raises(ValueError, match="run time"):
        _jit.gen_gemm_module("oasr_gemm_test", [sm80], ("fp16",), with_c=True)
    spec = _jit.gen_config_module(c, "fp16", "relu", with_c=True)
    assert spec.name == f"oasr_gemm_relu_fp16_{c.id}_c"
    assert list(_rendered(spec)) == [f"gemm_relu_fp16_{c.id}_c.cu"]
    assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm_relu_fp16_{c.id}_c, " in _binding(spec)


def test_sm80_units_name_their_split_and_export_the_workspace_size():
    serial = configs.Sm80Config(64, 128, 64, 32, 64, 4, "serial", 2)
    streamk = configs.Sm80Config(128, 128, 64, 64, 64, 3, "streamk")
    spec = _jit.gen_gemm_module("oasr_gemm_test", [configs.DEFAULT, serial, streamk], ("bf16",))
    rendered = _rendered(spec)
    assert "Sm90Gemm<" in rendered[f"gemm_bf16_{configs.DEFAULT.id}.cu"]  # lanes share a module
    text = rendered[f"gemm_bf16_{serial.id}.cu"]
    assert "Sm80Gemm<cutlass::bfloat16_t, 64, 128, 64,\n" in text
    assert "32, 64, 4,\n" in text  # warp tile, stages
    assert "oasr::gemm::SplitK::kSerial, 2," in text
    function = f"gemm_bf16_{serial.id}"
    assert f"\nint64_t {function}_workspace(int64_t m," in text
    binding = _binding(spec)
    assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({function}, {function});" in binding
    assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({function}_workspace, {function}_workspace);" in binding
    assert "OptionalTensor c, OptionalTensor workspace);" in binding  # the sm80 signature
    assert "oasr::gemm::SplitK::kStreamK, 1," in rendered[f"gemm_bf16_{streamk.id}.cu"]
    swish = _jit.gen_config_module(serial, "fp16", "swish")
    assert swish.name == f"oasr_gemm_swish_fp16_{serial.id}"
    (unit,) = _rendered(swish).values()
    assert "oasr::gemm::SwishAct>;" in unit


def test_one_module_per_variant_and_the_production_set():
    """A call builds one CUTLASS unit: each (config, dtype, epilogue, with C) is its own module,
    named after the function it exports; the prebuilt set is the production configs' variants."""
    first = configs.tuning_configs(HOPPER)[0]
    spec = _jit.gen_config_module(first, "bf16")
    assert spec.name == f"oasr_gemm_bf16_{first.id}" and spec.use_cutlass
    assert list(_rendered(spec)) == [f"gemm_bf16_{first.id}.cu"]
    assert sorted(s.name for s in spec.sources) == sorted(
        [f"gemm_bf16_{first.id}.cu", f"{spec.name}_jit_binding.cc"]
    )
    production = configs.production_configs(HOPPER)
    acts = ("", "relu_", "swish_", "gelu_", "gelu_tanh_")
    expected = [
        f"oasr_gemm_{act}{dt}_{x.id}{c}"
        for c in ("", "_c")
        for act in acts
        for dt in ("fp16", "bf16")
        for x in production
        if not c or x.lane != configs.SM80_LANE
    ]
    assert [s.name for s in _jit.production_specs(HOPPER)] == [
        *expected,
        _jit.BMM_MODULE,
        _jit.GROUP_MODULE,
        _jit.LOG_SOFTMAX_MODULE,
        _jit.HEAD_MODULE,
    ]
    # off sm_90: the sm80 lane's production configs, no with-C kernels, no fused heads
    ampere = [s.name for s in _jit.production_specs(parse_arch("8.0"))]
    assert not any(n.endswith("_c") for n in ampere) and _jit.HEAD_MODULE not in ampere


def test_bmm_units_per_dtype_and_b_layout():
    """A launcher unit (with the general lane) per (dtype, B layout), and a unit per tuned
    config, which the launcher lists largest tile first."""
    spec = _jit.gen_bmm_module()
    rendered = _rendered(spec)
    pairs = [(d, lay) for d in ("fp16", "bf16") for lay in ("b_row", "b_col")]
    tuned = [c.id for c in configs.BMM_TUNED]
    assert sorted(rendered) == sorted(
        [f"bmm_{d}_{lay}.cu" for d, lay in pairs]
        + [f"bmm_{d}_{lay}_{c}.cu" for d, lay in pairs for c in tuned]
    )
    text = rendered["bmm_bf16_b_col.cu"]
    assert "launch_bmm<T, false>" in text and "using T = cutlass::bfloat16_t;" in text
    binding = _binding(spec)
    for export in ("bmm_bf16_b_col", "bmm_bf16_b_col_lane", "bmm_bf16_b_col_with"):
        assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({export}, {export});" in binding
    assert "\ntvm::ffi::String bmm_bf16_b_col_lane(TensorView out," in text
    positions = [text.index(f'{{"{c}", ') for c in tuned]
    assert positions == sorted(positions)  # largest tile first
    assert "launch_bmm<T, true>" in rendered["bmm_fp16_b_row.cu"]
    unit = rendered["bmm_fp16_b_row_t128x128x64_c1x1_pp.cu"]
    assert "Sm90Bmm<cutlass::half_t, 128, 128, 64, false,\n                 true>" in unit
    assert "LaunchResult bmm_fp16_b_row_t128x128x64_c1x1_pp(" in unit


def test_bmm_tuned_configs_are_buildable_and_ordered():
    areas = [c.tile_m * c.tile_n for c in configs.BMM_TUNED]
    assert areas == sorted(areas, reverse=True)
    assert all(configs.reject_reason(c) is None for c in configs.BMM_TUNED)


def test_a_bmm_module_without_tuned_configs_has_no_table():
    spec = _jit.gen_bmm_module("oasr_gemm_bmm_general", ("fp16",), ("b_row",), ())
    (text,) = _rendered(spec).values()
    assert "kTuned = nullptr" in text and "kNumTuned = 0" in text


def test_group_gemm_units_one_per_dtype():
    spec = _jit.gen_group_module()
    rendered = _rendered(spec)
    assert sorted(rendered) == ["group_gemm_bf16.cu", "group_gemm_fp16.cu"]
    assert "launch_group_gemm<cutlass::half_t>" in rendered["group_gemm_fp16.cu"]
    assert "\nvoid group_gemm_bf16(TensorView out," in rendered["group_gemm_bf16.cu"]
    export = "TVM_FFI_DLL_EXPORT_TYPED_FUNC(group_gemm_bf16, group_gemm_bf16);"
    assert export in _binding(spec)


def test_static_modules_export_from_their_binding_units():
    """The row pass and the fused heads: static sources, one binding unit each."""
    for spec, exports in (
        (_jit.gen_log_softmax_module(), ["log_softmax_rows"]),
        (_jit.gen_head_module(), ["log_softmax_head_sm90", "log_softmax_cluster_sm90"]),
    ):
        paths = [s.path for s in spec.sources]
        (binding,) = [p for p in paths if "_jit_binding." in p.name]
        assert binding.name == spec.name.removeprefix("oasr_gemm_") + "_jit_binding.cu"
        text = binding.read_text()
        for export in exports:
            assert f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({export}, {export});" in text
        assert not any("TVM_FFI_DLL_EXPORT" in p.read_text() for p in paths if p != binding)
