// Launcher-side helpers shared by every family: input checks that raise Python exceptions
// naming the tensor and the fix, the launcher prologues (check_out_like, check_param,
// optional_ptr), dtype dispatch, the row view of an N-D tensor, the exact storage-overlap test,
// and (in CUDA translation units) the device scope and stream.
//
// Launchers re-check what the Python API validated, so a direct module call raises instead of
// faulting the CUDA context. Everything here reads tensor metadata only; nothing touches data.
#pragma once

#include <dlpack/dlpack.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <tvm/ffi/extra/cuda/device_guard.h>
#endif

using TensorView = tvm::ffi::TensorView;
using OptionalTensor = tvm::ffi::Optional<tvm::ffi::TensorView>;

namespace oasr {

// ---------------------------------------------------------------------------------------------
// dtypes

inline constexpr DLDataType kFloat32{kDLFloat, 32, 1};
inline constexpr DLDataType kFloat16{kDLFloat, 16, 1};
inline constexpr DLDataType kBFloat16{kDLBfloat, 16, 1};
inline constexpr DLDataType kFloat64{kDLFloat, 64, 1};
inline constexpr DLDataType kInt8{kDLInt, 8, 1};
inline constexpr DLDataType kUInt8{kDLUInt, 8, 1};
inline constexpr DLDataType kInt32{kDLInt, 32, 1};
inline constexpr DLDataType kInt64{kDLInt, 64, 1};
inline constexpr DLDataType kBool{kDLBool, 8, 1};

inline bool same_dtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

inline std::string dtype_name(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLBool: return "bool";
    default: base = "dtype_code" + std::to_string(t.code) + "_"; break;
  }
  std::string name = base + std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

inline int64_t element_bytes(const TensorView& t) { return (t.dtype().bits * t.dtype().lanes + 7) / 8; }

inline std::string shape_str(const TensorView& t) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < t.ndim(); ++i) os << (i ? ", " : "") << t.size(i);
  os << "]";
  return os.str();
}

inline std::string strides_str(const TensorView& t) {
  std::ostringstream os;
  os << "(";
  for (int i = 0; i < t.ndim(); ++i) os << (i ? ", " : "") << t.stride(i);
  os << ")";
  return os.str();
}

// The first element's address (DLPack allows a byte offset beside the data pointer).
inline char* data_bytes(const TensorView& t) {
  return static_cast<char*>(t.data_ptr()) + t.byte_offset();
}

// ---------------------------------------------------------------------------------------------
// checks: each raises a Python exception naming the tensor, what was expected, and the fix

inline void check_cuda(const TensorView& t, const char* name) {
  if (t.device().device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << name << " must be a CUDA tensor, got device type "
                              << t.device().device_type << "; move it with .cuda()";
  }
}

inline void check_dtype(const TensorView& t, std::initializer_list<DLDataType> allowed,
                        const char* name) {
  for (DLDataType d : allowed) {
    if (same_dtype(t.dtype(), d)) return;
  }
  std::ostringstream os;
  for (auto it = allowed.begin(); it != allowed.end(); ++it) {
    os << (it == allowed.begin() ? "" : ", ") << dtype_name(*it);
  }
  TVM_FFI_THROW(TypeError) << name << " has dtype " << dtype_name(t.dtype())
                           << "; supported: " << os.str();
}

inline void check_same_dtype(const TensorView& a, const char* a_name, const TensorView& b,
                             const char* b_name) {
  if (!same_dtype(a.dtype(), b.dtype())) {
    TVM_FFI_THROW(TypeError) << a_name << " (" << dtype_name(a.dtype()) << ") and " << b_name
                             << " (" << dtype_name(b.dtype()) << ") must have the same dtype";
  }
}

inline void check_ndim(const TensorView& t, int ndim, const char* name) {
  if (t.ndim() != ndim) {
    TVM_FFI_THROW(ValueError) << name << " must be " << ndim << "-D, got shape " << shape_str(t);
  }
}

inline void check_size(const TensorView& t, int dim, int64_t expected, const char* name) {
  if (t.size(dim) != expected) {
    TVM_FFI_THROW(ValueError) << name << ".shape[" << dim << "] must be " << expected
                              << ", got shape " << shape_str(t);
  }
}

inline void check_same_shape(const TensorView& a, const char* a_name, const TensorView& b,
                             const char* b_name) {
  bool same = a.ndim() == b.ndim();
  for (int i = 0; same && i < a.ndim(); ++i) same = a.size(i) == b.size(i);
  if (!same) {
    TVM_FFI_THROW(ValueError) << a_name << " " << shape_str(a) << " and " << b_name << " "
                              << shape_str(b) << " must have the same shape";
  }
}

inline void check_same_device(const TensorView& a, const char* a_name, const TensorView& b,
                              const char* b_name) {
  if (a.device().device_type != b.device().device_type ||
      a.device().device_id != b.device().device_id) {
    TVM_FFI_THROW(ValueError) << a_name << " (device " << a.device().device_type << ":"
                              << a.device().device_id << ") and " << b_name << " (device "
                              << b.device().device_type << ":" << b.device().device_id
                              << ") must be on the same device";
  }
}

inline void check_contiguous(const TensorView& t, const char* name) {
  if (!t.IsContiguous()) {
    TVM_FFI_THROW(ValueError) << name << " must be contiguous, got shape " << shape_str(t)
                              << " strides " << strides_str(t) << "; call .contiguous()";
  }
}

inline void check_last_dim_contiguous(const TensorView& t, const char* name) {
  if (t.ndim() > 0 && t.size(-1) > 1 && t.stride(-1) != 1) {
    TVM_FFI_THROW(ValueError) << name << " must have a unit stride in its last dimension, got "
                              << "strides " << strides_str(t) << "; call .contiguous()";
  }
}

// 16-byte alignment for 128-bit vector access: every row starts on a 16-byte boundary (the base
// address and the byte stride of every dimension longer than one, except the unit-stride last,
// are multiples of 16). Whether a row's *length* is a whole number of vectors is the kernel's
// business: most handle a scalar tail.
inline bool is_aligned_16(const TensorView& t) {
  if (reinterpret_cast<uintptr_t>(data_bytes(t)) % 16 != 0) return false;
  for (int i = 0; i + 1 < t.ndim(); ++i) {
    if (t.size(i) > 1 && (t.stride(i) * element_bytes(t)) % 16 != 0) return false;
  }
  return true;
}

inline void check_aligned_16(const TensorView& t, const char* name) {
  if (!is_aligned_16(t)) {
    TVM_FFI_THROW(ValueError) << name << " must be 16-byte aligned (its base address and row "
                              << "strides in bytes), got shape " << shape_str(t) << " strides "
                              << strides_str(t) << " dtype " << dtype_name(t.dtype())
                              << "; pad rows to a multiple of "
                              << 16 / std::max<int64_t>(element_bytes(t), 1)
                              << " elements or pass a fresh (contiguous) tensor";
  }
}

// "cuda:0", or "device type 1:0" for another device type (DLPack's codes).
inline std::string device_str(DLDevice d) {
  const std::string type =
      d.device_type == kDLCUDA ? "cuda" : "device type " + std::to_string(d.device_type);
  return type + ":" + std::to_string(d.device_id);
}

// Every tensor of a launch lives on the output's device (`device`; in the launchers a CUDA
// device, which DeviceScope checked).
inline void check_on_device(const TensorView& t, const char* name, DLDevice device) {
  if (t.device().device_type != device.device_type || t.device().device_id != device.device_id) {
    TVM_FFI_THROW(ValueError) << name << " is on device " << t.device().device_type << ":"
                              << t.device().device_id << " but the output is on "
                              << device_str(device) << "; move all arguments to one device";
  }
}

// ---------------------------------------------------------------------------------------------
// launcher prologues: the checks that open the launchers of elementwise and row-wise ops

// `out` of an op that writes one value per element of `x`: on x's device, of x's dtype and
// shape, contiguous.
inline void check_out_like(const TensorView& out, const TensorView& x, const char* x_name) {
  check_on_device(x, x_name, out.device());
  check_same_dtype(out, "out", x, x_name);
  check_same_shape(out, "out", x, x_name);
  check_contiguous(out, "out");
}

// An optional parameter of the op (a weight, a bias, a running statistic): absent, or `numel`
// contiguous elements of like's dtype on like's device (`like`: the input, already checked to
// be on the output's device).
inline void check_param(const OptionalTensor& p, const char* name, int64_t numel,
                        const TensorView& like, const char* like_name) {
  if (!p.has_value()) return;
  const TensorView t = p.value();
  check_on_device(t, name, like.device());
  check_same_dtype(t, name, like, like_name);
  check_contiguous(t, name);
  if (t.numel() != numel) {
    TVM_FFI_THROW(ValueError) << name << " must have " << numel << " elements, got shape "
                              << shape_str(t);
  }
}

// The first element of an optional tensor as a T*, or null where it is absent.
template <typename T>
const T* optional_ptr(const OptionalTensor& t) {
  return t.has_value() ? reinterpret_cast<const T*>(data_bytes(t.value())) : nullptr;
}

// ---------------------------------------------------------------------------------------------
// the row view: an N-D tensor as [rows, cols] with one row stride, without a copy

struct RowView {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements between consecutive rows
};

// Leading dimensions collapse into rows when they are uniformly strided (a contiguous tensor, a
// channel slice x[..., :C], a row slice); the last dimension must have unit stride.
inline bool try_as_rows(const TensorView& t, RowView* view) {
  if (t.ndim() == 0) {
    *view = {1, 1, 1};
    return true;
  }
  int64_t cols = t.size(-1);
  for (int i = 0; i + 1 < t.ndim(); ++i) {
    if (t.size(i) == 0) {  // no rows: any strides will do
      *view = {0, cols, cols};
      return true;
    }
  }
  if (cols > 1 && t.stride(-1) != 1) return false;
  int64_t rows = 1;
  int64_t row_stride = cols;
  bool have_stride = false;
  // Walk the leading dims innermost-first; each must step by (size of inner block) * stride.
  for (int i = t.ndim() - 2; i >= 0; --i) {
    int64_t size = t.size(i);
    if (size == 1) continue;
    if (!have_stride) {
      row_stride = t.stride(i);
      have_stride = true;
    } else if (t.stride(i) != rows * row_stride) {
      return false;
    }
    rows *= size;
  }
  *view = {rows, cols, row_stride};
  return true;
}

inline RowView as_rows(const TensorView& t, const char* name) {
  RowView view;
  if (!try_as_rows(t, &view)) {
    TVM_FFI_THROW(ValueError) << name << " with shape " << shape_str(t) << " and strides "
                              << strides_str(t) << " is not a set of uniformly strided rows "
                              << "with a unit-stride last dimension; call .contiguous()";
  }
  return view;
}

// ---------------------------------------------------------------------------------------------
// storage overlap

namespace detail {

inline int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Byte intervals [base + r * stride, base + r * stride + width) for r in [0, rows).
struct ByteRows {
  int64_t base, rows, stride, width;
  int64_t lo() const { return base; }
  int64_t hi() const { return base + (rows - 1) * stride + width; }
};

// Does any row of `b` intersect the byte interval [lo, hi)?
inline bool rows_hit(const ByteRows& b, int64_t lo, int64_t hi) {
  if (b.rows == 1 || b.stride == 0) return b.base < hi && b.base + b.width > lo;
  // rows j with lo - width < base + j * stride < hi
  int64_t j_min = std::max<int64_t>(0, floor_div(lo - b.width - b.base, b.stride) + 1);
  int64_t j_max = std::min<int64_t>(b.rows - 1, -floor_div(-(hi - b.base), b.stride) - 1);
  return j_min <= j_max;
}

inline bool byte_rows_overlap(ByteRows a, ByteRows b) {
  if (a.rows == 0 || b.rows == 0 || a.width == 0 || b.width == 0) return false;
  if (a.hi() <= b.lo() || b.hi() <= a.lo()) return false;
  if (a.stride == b.stride && a.stride > 0) {
    // Row i of a meets row j of b iff k = i - j puts k * stride in (d - width_a, d + width_b)
    // with d = base_b - base_a (closed form for the common case of one buffer's slices).
    int64_t d = b.base - a.base;
    int64_t k_min = std::max<int64_t>(-(b.rows - 1), floor_div(d - a.width, a.stride) + 1);
    int64_t k_max = std::min<int64_t>(a.rows - 1, -floor_div(-(d + b.width), a.stride) - 1);
    return k_min <= k_max;
  }
  if (a.rows > b.rows) std::swap(a, b);
  for (int64_t i = 0; i < a.rows; ++i) {
    int64_t lo = a.base + i * a.stride;
    if (rows_hit(b, lo, lo + a.width)) return true;
  }
  return false;
}

// The tensor as byte rows, or (when it is not row-strided) its whole byte range as one row.
inline ByteRows to_byte_rows(const TensorView& t) {
  const int64_t base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data_bytes(t)));
  const int64_t esize = element_bytes(t);
  if (t.numel() == 0) return {base, 0, 0, 0};
  RowView view;
  if (try_as_rows(t, &view) && view.row_stride >= 0) {
    return {base, view.rows, view.row_stride * esize, view.cols * esize};
  }
  int64_t lo = 0, hi = 0;  // element offsets of the extremes (strides may be negative or zero)
  for (int i = 0; i < t.ndim(); ++i) {
    int64_t reach = (t.size(i) - 1) * t.stride(i);
    (reach < 0 ? lo : hi) += reach;
  }
  return {base + lo * esize, 1, 0, (hi - lo + 1) * esize};
}

}  // namespace detail

// Whether two tensors share any byte of storage. Exact for row-strided views (two column halves
// of one buffer do not overlap); conservative (their whole extents) for other layouts.
inline bool storage_overlaps(const TensorView& a, const TensorView& b) {
  if (a.device().device_type != b.device().device_type ||
      a.device().device_id != b.device().device_id) {
    return false;
  }
  return detail::byte_rows_overlap(detail::to_byte_rows(a), detail::to_byte_rows(b));
}

inline void check_no_overlap(const TensorView& out, const char* out_name, const TensorView& in,
                             const char* in_name) {
  if (storage_overlaps(out, in)) {
    TVM_FFI_THROW(ValueError) << out_name << " shares storage with " << in_name
                              << "; this op cannot write in place: pass a separate output buffer";
  }
}

// ---------------------------------------------------------------------------------------------
// dtype dispatch: `OASR_DISPATCH_FLOAT_DTYPE(x.dtype(), "x", c_type, [&] { ... })`

[[noreturn]] inline void throw_unsupported_dtype(DLDataType dtype, const char* name,
                                                 const char* supported) {
  TVM_FFI_THROW(TypeError) << name << " has dtype " << dtype_name(dtype)
                           << "; supported: " << supported;
  __builtin_unreachable();
}

}  // namespace oasr

#define OASR_DISPATCH_CASE_(DTYPE_CONST, CTYPE, c_type, ...) \
  if (::oasr::same_dtype(_oasr_dtype, DTYPE_CONST)) {       \
    using c_type = CTYPE;                                    \
    return __VA_ARGS__();                                    \
  }

// float32, float16, bfloat16 (needs oasr/common/types.h for the 16-bit types)
#define OASR_DISPATCH_FLOAT_DTYPE(dtype, name, c_type, ...)                                  \
  [&]() {                                                                                    \
    const DLDataType _oasr_dtype = (dtype);                                                  \
    OASR_DISPATCH_CASE_(::oasr::kFloat32, float, c_type, __VA_ARGS__)                        \
    OASR_DISPATCH_CASE_(::oasr::kFloat16, ::oasr::half, c_type, __VA_ARGS__)                 \
    OASR_DISPATCH_CASE_(::oasr::kBFloat16, ::oasr::bfloat16, c_type, __VA_ARGS__)            \
    ::oasr::throw_unsupported_dtype(_oasr_dtype, name, "float32, float16, bfloat16");        \
  }()

// float16, bfloat16 (tensor-core families)
#define OASR_DISPATCH_HALF_DTYPE(dtype, name, c_type, ...)                                   \
  [&]() {                                                                                    \
    const DLDataType _oasr_dtype = (dtype);                                                  \
    OASR_DISPATCH_CASE_(::oasr::kFloat16, ::oasr::half, c_type, __VA_ARGS__)                 \
    OASR_DISPATCH_CASE_(::oasr::kBFloat16, ::oasr::bfloat16, c_type, __VA_ARGS__)            \
    ::oasr::throw_unsupported_dtype(_oasr_dtype, name, "float16, bfloat16");                 \
  }()

// ---------------------------------------------------------------------------------------------
// CUDA translation units: the tensor's device and TVM-FFI's current stream for it

#ifdef __CUDACC__
namespace oasr {

inline void check_cuda_status(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    TVM_FFI_THROW(RuntimeError) << what << " failed: " << cudaGetErrorName(status) << " ("
                                << cudaGetErrorString(status) << ")";
  }
}

// The stream TVM-FFI's caller set for this device (torch's current stream when called from
// torch), never the legacy default stream, so every launch is capturable in a CUDA graph.
inline cudaStream_t get_stream(DLDevice device) {
  return static_cast<cudaStream_t>(TVMFFIEnvGetStream(device.device_type, device.device_id));
}

// Every launcher opens one: `oasr::DeviceScope scope(out);` makes the output's device current
// for the launcher's scope (restoring the caller's on exit) and gives that device's stream.
// Launching on the tensor's device, not the current one, is what makes cuda:1 tensors work
// while cuda:0 is current.
class DeviceScope {
 public:
  explicit DeviceScope(const TensorView& anchor)
      : guard_((check_cuda(anchor, "output"), anchor.device().device_id)),
        device_(anchor.device()),
        stream_(get_stream(anchor.device())) {}

  cudaStream_t stream() const { return stream_; }
  int device_id() const { return device_.device_id; }

  // Every tensor of the call must live on the scope's device.
  void check_same_device(const TensorView& t, const char* name) const {
    check_on_device(t, name, device_);
  }

 private:
  tvm::ffi::CUDADeviceGuard guard_;
  DLDevice device_;
  cudaStream_t stream_;
};

}  // namespace oasr

// Check a launch: configuration errors (e.g. too much shared memory) surface here, cleared so
// they never stick to the next call.
#define OASR_CHECK_LAUNCH(what) ::oasr::check_cuda_status(cudaGetLastError(), what)
#endif  // __CUDACC__
