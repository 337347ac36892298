// Launchers of the elementwise activations and GLU (module oasr_norm_activation).
#include "oasr/norm/activation.cuh"
#include "tvm_ffi_utils.h"

using namespace oasr;

// out = act(x), x [..., C] (uniformly strided rows), out contiguous; out may be x itself.
// `activation` is a norm::Activation code other than kNone.
void activation(TensorView out, TensorView x, int64_t activation) {
  DeviceScope scope(out);
  check_out_like(out, x, "x");
  const RowView rows = as_rows(x, "x");
  const bool in_place = data_bytes(out) == data_bytes(x) && x.IsContiguous();
  if (!in_place) check_no_overlap(out, "out", x, "x");
  if (activation <= 0 || activation >= int64_t(norm::Activation::kCount)) {
    TVM_FFI_THROW(ValueError) << "activation code must be in [1, "
                              << int64_t(norm::Activation::kCount) << "), got " << activation;
  }
  if (rows.rows == 0 || rows.cols == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    const norm::ActivationArgs<T> a{reinterpret_cast<T*>(data_bytes(out)),
                                    reinterpret_cast<const T*>(data_bytes(x)), rows.rows,
                                    rows.cols, rows.row_stride};
    norm::with_activation(static_cast<norm::Activation>(activation), [&](auto act) {
      constexpr norm::Activation kAct = decltype(act)::value;
      if constexpr (kAct != norm::Activation::kNone) {  // refused above
        check_cuda_status(norm::launch_activation<kAct>(a, scope.stream()), "activation kernel");
      }
    });
  });
}

// out = GELU(x) by the table kernel whatever the size (gelu_table.cuh; `activation` takes it for
// large tensors only): what the GPU tests compare with the erff kernel on every 16-bit input.
// x and out contiguous float16 / bfloat16 starting on 16-byte boundaries; out may be x itself.
void gelu_table(TensorView out, TensorView x) {
  DeviceScope scope(out);
  scope.check_same_device(x, "x");
  check_dtype(x, {kFloat16, kBFloat16}, "x");
  check_same_dtype(out, "out", x, "x");
  check_same_shape(out, "out", x, "x");
  check_contiguous(out, "out");
  check_contiguous(x, "x");
  for (const auto& [t, name] : {std::pair{&out, "out"}, std::pair{&x, "x"}}) {
    if (reinterpret_cast<uintptr_t>(data_bytes(*t)) % 16 != 0) {
      TVM_FFI_THROW(ValueError) << name << " must start on a 16-byte boundary; pass a fresh "
                                << "(contiguous) tensor";
    }
  }
  if (data_bytes(out) != data_bytes(x)) check_no_overlap(out, "out", x, "x");
  if (x.numel() == 0) return;
  bool ready;
  check_cuda_status(norm::make_gelu_tables(scope.stream(), &ready), "making the GELU tables");
  if (!ready) {
    TVM_FFI_THROW(RuntimeError) << "the GELU tables are made on the first call outside CUDA-graph "
                                << "capture; call gelu_table once before capturing it";
  }
  OASR_DISPATCH_HALF_DTYPE(x.dtype(), "x", T, [&] {
    check_cuda_status(norm::launch_gelu_table(reinterpret_cast<T*>(data_bytes(out)),
                                              reinterpret_cast<const T*>(data_bytes(x)),
                                              x.numel(), scope.stream()),
                      "GELU table kernel");
  });
}

// out = a * sigmoid(b) with [a | b] = x [..., 2C] (uniformly strided rows), out [..., C].
void glu(TensorView out, TensorView x) {
  DeviceScope scope(out);
  scope.check_same_device(x, "x");
  check_same_dtype(out, "out", x, "x");
  check_contiguous(out, "out");
  const RowView rows = as_rows(x, "x");
  if (x.ndim() == 0 || rows.cols % 2 != 0) {
    TVM_FFI_THROW(ValueError) << "x must have an even last dimension (GLU halves it), got shape "
                              << shape_str(x);
  }
  bool shape_ok = out.ndim() == x.ndim() && out.size(-1) == rows.cols / 2;
  for (int i = 0; shape_ok && i + 1 < x.ndim(); ++i) shape_ok = out.size(i) == x.size(i);
  if (!shape_ok) {
    TVM_FFI_THROW(ValueError) << "out must be x's shape " << shape_str(x)
                              << " with the last dimension halved, got " << shape_str(out);
  }
  check_no_overlap(out, "out", x, "x");
  if (rows.rows == 0 || rows.cols == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", T, [&] {
    const norm::GluArgs<T> a{reinterpret_cast<T*>(data_bytes(out)),
                             reinterpret_cast<const T*>(data_bytes(x)), rows.rows, rows.cols / 2,
                             rows.row_stride};
    check_cuda_status(norm::launch_glu(a, scope.stream()), "glu kernel");
  });
}
