// Launcher of the row normalizations (LayerNorm, RMSNorm, BiasNorm, each optionally with a fused
// residual add and activation). Each JIT module is one (dtype, kind, fused add, activated)
// instantiation of row_norm_launch, defined as the module's `row_norm` by
// templates/row_norm.cu.jinja; oasr_norm.normalization picks the module and maps the public ops
// onto it.
#pragma once

#include <type_traits>

#include "oasr/norm/row_norm.cuh"
#include "tvm_ffi_utils.h"

namespace oasr {

// out = act(norm(x [+ residual])); residual_out = x + residual when residual is given.
// kind: 0 LayerNorm (weight, beta), 1 RMSNorm (weight), 2 BiasNorm (center, log_scale); it and
// the presence of residual must be the module's, a nonzero activation needs an activated module.
template <typename TModule, norm::RowNormKind kKind, bool kAdd, bool kActivated>
void row_norm_launch(const char* module, TensorView out, OptionalTensor residual_out,
                     TensorView x, OptionalTensor residual, OptionalTensor weight,
                     OptionalTensor beta, OptionalTensor center, OptionalTensor log_scale,
                     int64_t kind, double eps, int64_t activation) {
  DeviceScope scope(out);
  check_out_like(out, x, "x");
  const RowView rows = as_rows(x, "x");
  check_no_overlap(out, "out", x, "x");
  if (kind < 0 || kind > 2) TVM_FFI_THROW(ValueError) << "unknown norm kind " << kind;
  if (activation < 0 || activation >= int64_t(norm::Activation::kCount)) {
    TVM_FFI_THROW(ValueError) << "unknown activation code " << activation;
  }
  if (kind != int64_t(kKind)) {
    TVM_FFI_THROW(ValueError) << module << " holds norm kind " << int(kKind) << ", not " << kind;
  }
  if (activation != 0 && !kActivated) {
    TVM_FFI_THROW(ValueError) << module << " has no fused activation (its _act twin has)";
  }
  if (residual.has_value() != kAdd) {
    TVM_FFI_THROW(ValueError) << module << (kAdd ? " needs" : " takes no")
                              << " residual and residual_out";
  }
  RowView res_rows, res_out_rows;
  if (residual.has_value() != residual_out.has_value()) {
    TVM_FFI_THROW(ValueError) << "residual and residual_out come together";
  }
  if (residual.has_value()) {
    if (kind == 2) TVM_FFI_THROW(ValueError) << "BiasNorm has no fused residual add";
    scope.check_same_device(residual.value(), "residual");
    scope.check_same_device(residual_out.value(), "residual_out");
    for (const auto& [t, name] : {std::pair{residual.value(), "residual"},
                                  std::pair{residual_out.value(), "residual_out"}}) {
      check_same_dtype(t, name, x, "x");
      check_same_shape(t, name, x, "x");
    }
    res_rows = as_rows(residual.value(), "residual");
    res_out_rows = as_rows(residual_out.value(), "residual_out");
    check_no_overlap(residual_out.value(), "residual_out", x, "x");
    check_no_overlap(out, "out", residual_out.value(), "residual_out");
    check_no_overlap(out, "out", residual.value(), "residual");
    // residual_out may be residual itself (the in-place sum): each element is read, then
    // written, by the same thread. Any other overlap would race.
    const bool same = data_bytes(residual.value()) == data_bytes(residual_out.value()) &&
                      res_rows.row_stride == res_out_rows.row_stride;
    if (!same) check_no_overlap(residual_out.value(), "residual_out", residual.value(), "residual");
  }
  check_param(weight, "weight", rows.cols, x, "x");
  check_param(beta, "bias", rows.cols, x, "x");
  check_param(center, "bias", rows.cols, x, "x");
  check_param(log_scale, "log_scale", 1, x, "x");
  if (kind == 2 && (!center.has_value() || !log_scale.has_value())) {
    TVM_FFI_THROW(ValueError) << "BiasNorm needs its bias and log_scale";
  }
  if (rows.rows == 0 || rows.cols == 0) return;
  if (rows.rows > 0x7fffffff) TVM_FFI_THROW(ValueError) << "x has more than 2^31 - 1 rows";

  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    if constexpr (!std::is_same_v<T, TModule>) {
      TVM_FFI_THROW(TypeError) << module << " holds the kernels of another dtype than x's "
                               << dtype_name(x.dtype());
    } else {
    norm::RowNormArgs<T> args;
    args.out = reinterpret_cast<T*>(data_bytes(out));
    args.x = reinterpret_cast<const T*>(data_bytes(x));
    if (residual.has_value()) {
      args.residual = optional_ptr<T>(residual);
      args.residual_out = const_cast<T*>(optional_ptr<T>(residual_out));
      args.residual_stride = res_rows.row_stride;
      args.residual_out_stride = res_out_rows.row_stride;
    }
    args.weight = optional_ptr<T>(weight);
    args.beta = optional_ptr<T>(beta);
    args.center = optional_ptr<T>(center);
    args.log_scale = optional_ptr<T>(log_scale);
    args.rows = rows.rows;
    args.cols = rows.cols;
    args.x_stride = rows.row_stride;
    args.eps = static_cast<float>(eps);
    args.kind = static_cast<norm::RowNormKind>(kind);
    args.activation = static_cast<norm::Activation>(activation);
    check_cuda_status(norm::launch_row_norm_kind<T, kKind, kAdd, kActivated>(args, scope.stream()),
                      "row_norm launch");
    }
  });
}

}  // namespace oasr
