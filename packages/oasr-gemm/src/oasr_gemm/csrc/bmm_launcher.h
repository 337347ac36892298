// The launcher of bmm (one rendered translation unit per dtype and B layout): the checks, the
// batch folding, the choice of lane and kernel, the launches.
//
// K <= kBmmSmallKMax runs the small-K kernel (plain FMAs, any alignment). Larger K runs the
// tuned lane (sm90 TMA + wgmma, bmm_sm90_template.cuh) when the batch folds into one launch, no
// operand is broadcast over it and everything is aligned to 8 elements. Else the small-N kernel
// (mma.sync on CTAs of 32 or 64 rows, any alignment, bmm_small_n.cuh) runs N <= 16, N <= 32
// where the loads would be 1 or 2 elements wide and N <= 64 where they would be 1; the rest runs
// the CUTLASS 2.x general lane (bmm_sm80_template.cuh), which takes any alignment (SIMT for
// single-element loads).
//
// out [B0, B1, M, N] (contiguous) = a [B0, B1, M, K] · b [B0, B1, K, N], where a and b are any
// strided views (stride 0: a broadcast batch), a with a unit stride along K and b with a unit
// stride along N (kBRowMajor) or along K. The Python API brings every call to this 4-D form
// without copies.
#pragma once

#include "oasr/common/arch_facts.h"
#include "oasr/common/types.h"
#include "oasr/gemm/bmm_sm80_template.cuh"
#include "oasr/gemm/bmm_small_k.cuh"
#include "oasr/gemm/bmm_small_n.cuh"
#include "tvm_ffi_utils.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace oasr::gemm {

// One kernel of the tuned lane, as its rendered unit exports it (templates/bmm_sm90.cu.jinja).
template <typename T>
struct TunedBmm {
  const char* id;  // the config id, e.g. t128x128x64_c1x1_coop
  int tile_m, tile_n;
  LaunchResult (*run)(const BmmProblem<T>&, cudaStream_t);
};

// The largest tile whose grid still fills the device (at least one CTA per SM), else the
// smallest: these problems are small, and a grid that leaves SMs idle costs more than a small
// tile's lower efficiency. A tile larger than the problem (rounded up to 64) in M or N only
// computes padding, so it is passed over. `tuned` is ordered largest tile first.
template <typename T>
const TunedBmm<T>& pick_tuned(const TunedBmm<T>* tuned, int count, int64_t m, int64_t n,
                              int64_t batch, int sms) {
  for (int i = 0; i < count; ++i) {
    const TunedBmm<T>& t = tuned[i];
    if (t.tile_m > round_up<int64_t>(m, 64) || t.tile_n > round_up<int64_t>(n, 64)) continue;
    const int64_t tiles = ceil_div<int64_t>(m, t.tile_m) * ceil_div<int64_t>(n, t.tile_n) * batch;
    if (tiles >= sms) return t;
  }
  return tuned[count - 1];
}

// A stride that does not matter (its dim has one element) is 0, so it never limits the
// alignment and a size-1 batch dim folds with anything.
inline int64_t used_stride(const TensorView& t, int dim) {
  return t.size(dim) > 1 ? t.stride(dim) : 0;
}

// The widest alignment (elements: 8, 4, 2, 1) that divides every value.
inline int widest_alignment(std::initializer_list<int64_t> values) {
  for (int align : {8, 4, 2}) {
    if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v % align == 0; })) {
      return align;
    }
  }
  return 1;
}

template <typename T, bool kBRowMajor, int kAlignAB, int kAlignC, int kTile = 64, int kWarp = 32>
void run_bmm(const BmmProblem<T>& p, cudaStream_t stream, const char* variant) {
  const cutlass::Status status =
      Sm80Bmm<T, kBRowMajor, kAlignAB, kAlignC, kTile, kTile, kWarp, kWarp>::run(p, stream);
  if (status != cutlass::Status::kSuccess) {
    check_cuda_status(cudaGetLastError(), variant);
    TVM_FFI_THROW(RuntimeError) << variant << " (alignments " << kAlignAB << " / " << kAlignC
                                << ") refused M=" << p.m << " N=" << p.n << " K=" << p.k
                                << " batch=" << p.batch << ": "
                                << cutlassGetStatusString(status);
  }
}

// Whether the general lane runs its 128 x 128 tile (warps of 64 x 64) rather than 64 x 64: with
// 8-element loads and B column-major (q · kT), where the wide tile pads M and N no more than the
// narrow one and its grid of one launch (`batch` problems) still has a CTA per SM. On the H200
// (eight CUTLASS 2.x tiles timed against each other, fp16, K 32-128) it took 0.74-0.85x the narrow
// tile's time at T 249-1000 with 256-1024 wide CTAs, and 1.2-1.4x at 16-64 of them.
template <bool kBRowMajor>
bool wide_bmm_tile(int align_ab, int64_t batch, int64_t m, int64_t n, int sms) {
  auto pads_like_narrow = [](int64_t x) { return ceil_div<int64_t>(x, 64) % 2 == 0; };
  return !kBRowMajor && align_ab == 8 && pads_like_narrow(m) && pads_like_narrow(n) &&
         batch * ceil_div<int64_t>(m, 128) * ceil_div<int64_t>(n, 128) >= sms;
}

// The instantiation for the two run-time alignments (kAlignC <= 8, any; kAlignAB 1: SIMT) and
// the tile (`wide`: wide_bmm_tile).
template <typename T, bool kBRowMajor>
void dispatch_bmm(const BmmProblem<T>& p, int align_ab, int align_c, bool wide,
                  cudaStream_t stream, const char* variant) {
  auto with_c = [&](auto ab, auto tile, auto warp) {
    constexpr int kAB = decltype(ab)::value, kT = decltype(tile)::value;
    constexpr int kW = decltype(warp)::value;
    switch (align_c) {
      case 8: return run_bmm<T, kBRowMajor, kAB, 8, kT, kW>(p, stream, variant);
      case 4: return run_bmm<T, kBRowMajor, kAB, 4, kT, kW>(p, stream, variant);
      case 2: return run_bmm<T, kBRowMajor, kAB, 2, kT, kW>(p, stream, variant);
      default: return run_bmm<T, kBRowMajor, kAB, 1, kT, kW>(p, stream, variant);
    }
  };
  using std::integral_constant;
  auto narrow = [&](auto ab) {
    with_c(ab, integral_constant<int, 64>{}, integral_constant<int, 32>{});
  };
  switch (align_ab) {
    case 8:
      if constexpr (!kBRowMajor) {
        if (wide) {
          return with_c(integral_constant<int, 8>{}, integral_constant<int, 128>{},
                        integral_constant<int, 64>{});
        }
      }
      return narrow(integral_constant<int, 8>{});
    case 4: return narrow(integral_constant<int, 4>{});
    case 2: return narrow(integral_constant<int, 2>{});
    default: return run_bmm<T, kBRowMajor, 1, 1>(p, stream, variant);
  }
}

// Which kernel a call runs: the launcher's choice, the CUTLASS general lane, the small-N kernel,
// or tuned kernel i >= 0 (for measuring the kernels against each other on one problem; K <=
// kBmmSmallKMax always runs the small-K kernel).
constexpr int kBmmAuto = -1;
constexpr int kBmmGeneral = -2;
constexpr int kBmmSmallN = -3;
// The widest N the launcher sends to the small-N kernel at any alignment, where CUTLASS's loads
// would be 2 elements and where they would be 1 (its SIMT kernel). On the H200 at T 249-501 the
// small-N kernel took 0.70-0.77x the CUTLASS kernel's time at N 24-32 with 2-element loads and
// 0.33-0.54x the SIMT kernel's at N 24-64, but 1.07-1.17x the 2-element loads' at N 40-64.
constexpr int kBmmSmallNAuto = 16;
constexpr int kBmmSmallNAutoLoads2 = 32;
constexpr int kBmmSmallNAutoLoads1 = kBmmSmallNMax;

// Checks the call and launches it; with dry_run, launches nothing and names the kernel it would
// run: "small_k", "sm90 <config id>", "small_n", "sm80 <load>/<store>" (the alignments; with
// " 128x128" for the wide tile), "simt" or "empty"
// (the name is built only then: a launch returns an empty string).
template <typename T, bool kBRowMajor>
std::string launch_bmm(TensorView out, TensorView a, TensorView b, const char* variant,
                       const TunedBmm<T>* tuned, int num_tuned, bool dry_run = false,
                       int choice = kBmmAuto) {
  if (choice < kBmmSmallN || choice >= num_tuned) {
    TVM_FFI_THROW(ValueError) << "kernel choice " << choice << " is not -1 (auto), -2 (the "
                              << "CUTLASS general lane), -3 (the small-N kernel) or a tuned "
                              << "kernel below " << num_tuned;
  }
  DeviceScope scope(out);
  constexpr DLDataType kDtype = std::is_same_v<T, cutlass::half_t> ? kFloat16 : kBFloat16;
  check_dtype(out, {kDtype}, "out");
  scope.check_same_device(a, "A");
  scope.check_same_device(b, "B");
  check_same_dtype(a, "A", out, "out");
  check_same_dtype(b, "B", out, "out");
  check_ndim(out, 4, "out");
  check_ndim(a, 4, "A");
  check_ndim(b, 4, "B");
  check_contiguous(out, "out");
  const int64_t b0 = out.size(0), b1 = out.size(1), m = out.size(2), n = out.size(3);
  const int64_t k = a.size(3);
  if (a.size(0) != b0 || a.size(1) != b1 || a.size(2) != m || b.size(0) != b0 ||
      b.size(1) != b1 || b.size(2) != k || b.size(3) != n) {
    TVM_FFI_THROW(ValueError) << "A " << shape_str(a) << " and B " << shape_str(b)
                              << " do not make out " << shape_str(out)
                              << " (A [B0, B1, M, K], B [B0, B1, K, N])";
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "bmm extents must be below 2^31";
  }
  if (k > 1 && a.stride(3) != 1) {
    TVM_FFI_THROW(ValueError) << "A " << shape_str(a) << " (strides " << strides_str(a)
                              << ") needs a unit stride along K; pass A.contiguous()";
  }
  const bool b_unit = kBRowMajor ? (n == 1 || b.stride(3) == 1) : (k == 1 || b.stride(2) == 1);
  if (!b_unit) {
    TVM_FFI_THROW(ValueError) << "B " << shape_str(b) << " (strides " << strides_str(b)
                              << ") needs a unit stride along " << (kBRowMajor ? "N" : "K")
                              << " for " << variant;
  }
  check_no_overlap(out, "out", a, "A");
  check_no_overlap(out, "out", b, "B");
  if (b0 * b1 * m * n == 0) return dry_run ? "empty" : "";
  if (k == 0) TVM_FFI_THROW(ValueError) << "K is 0: the product is empty";

  BmmProblem<T> p{};
  p.m = static_cast<int>(m), p.n = static_cast<int>(n), p.k = static_cast<int>(k);
  p.lda = m > 1 ? a.stride(2) : k;
  p.ldb = kBRowMajor ? (k > 1 ? b.stride(2) : n) : (n > 1 ? b.stride(3) : k);
  p.ldd = n;
  const int64_t sa0 = used_stride(a, 0), sa1 = used_stride(a, 1);
  const int64_t sb0 = used_stride(b, 0), sb1 = used_stride(b, 1);
  // The small-K and small-N kernels index both batch dims themselves.
  StridedBmmProblem<T> strided{};
  strided.a = reinterpret_cast<const T*>(data_bytes(a));
  strided.b = reinterpret_cast<const T*>(data_bytes(b));
  strided.d = reinterpret_cast<T*>(data_bytes(out));
  strided.m = p.m, strided.n = p.n, strided.k = p.k;
  strided.lda = p.lda, strided.ldb = p.ldb, strided.ldd = p.ldd, strided.b1 = b1;
  strided.a_stride[0] = sa0, strided.a_stride[1] = sa1;
  strided.b_stride[0] = sb0, strided.b_stride[1] = sb1;
  strided.d_stride[0] = b1 * m * n, strided.d_stride[1] = m * n;
  if (k <= kBmmSmallKMax) {
    if (dry_run) return "small_k";
    check_cuda_status(run_bmm_small_k<T, kBRowMajor>(strided, b0 * b1, scope.stream()), variant);
    return {};
  }
  if (choice == kBmmSmallN && n > kBmmSmallNMax) {
    TVM_FFI_THROW(ValueError) << "the small-N kernel takes N <= " << kBmmSmallNMax << ", not "
                              << n;
  }
  // One batched launch of L problems when the two batch dims fold into one stride per operand
  // (the output is contiguous: it always folds); else a launch per index of the smaller batch
  // dim, each over the other one.
  int64_t outer = 1, batch = b0 * b1, stride_a = sa1, stride_b = sb1, stride_d = m * n;
  int64_t outer_a = 0, outer_b = 0, outer_d = 0;  // strides between the launches
  if (b1 == 1) {
    stride_a = sa0, stride_b = sb0;
  } else if (b0 > 1 && (sa0 != sa1 * b1 || sb0 != sb1 * b1)) {
    if (b0 <= b1) {
      outer = b0, batch = b1;
      outer_a = sa0, outer_b = sb0, outer_d = b1 * m * n;
    } else {
      outer = b1, batch = b0;
      stride_a = sa0, stride_b = sb0, stride_d = b1 * m * n;
      outer_a = sa1, outer_b = sb1, outer_d = m * n;
    }
  }
  p.batch_stride_a = stride_a, p.batch_stride_b = stride_b, p.batch_stride_d = stride_d;
  const int64_t esize = sizeof(T);
  for (const TensorView* t : {&a, &b, &out}) {  // cannot happen for torch tensors
    if (reinterpret_cast<uintptr_t>(data_bytes(*t)) % esize != 0) {
      TVM_FFI_THROW(ValueError) << "an operand does not start on an element boundary";
    }
  }
  auto start = [&](const TensorView& t) {
    return static_cast<int64_t>(reinterpret_cast<uintptr_t>(data_bytes(t)) / esize);
  };
  // The loads: A along K, B along its contiguous axis; the stores: D along N.
  const int align_ab = widest_alignment({start(a), start(b), p.lda, p.ldb, k,
                                         kBRowMajor ? n : k, sa0, sa1, sb0, sb1});
  const int align_c = align_ab >= 2 ? widest_alignment({start(out), n}) : 1;
  const T* a0 = reinterpret_cast<const T*>(data_bytes(a));
  const T* b0p = reinterpret_cast<const T*>(data_bytes(b));
  T* d0 = reinterpret_cast<T*>(data_bytes(out));
  // The tuned lane: TMA reads 16-byte pieces at 16-byte strides, the batch (L) is one launch,
  // and a broadcast operand (batch stride 0) stays on the general lane.
  const bool broadcast = batch > 1 && (stride_a == 0 || stride_b == 0);
  const bool tunable = num_tuned > 0 && outer == 1 && align_ab == 8 && align_c == 8 &&
                       !broadcast && batch <= INT32_MAX;
  if (choice >= 0 && !tunable) {
    TVM_FFI_THROW(ValueError) << "the tuned lane cannot take this call (it needs one launch, no "
                              << "broadcast batch, 8-element alignment)";
  }
  if (tunable && choice >= kBmmAuto) {
    BmmProblem<T> q = p;
    q.batch = static_cast<int>(batch);
    q.a = a0, q.b = b0p, q.d = d0;
    if (batch == 1) {  // a used batch stride, so TMA's descriptor gets a valid one
      q.batch_stride_a = m * p.lda, q.batch_stride_b = (kBRowMajor ? k : n) * p.ldb;
    }
    q.device = scope.device_id();
    q.num_sms = num_sms(q.device);
    if (q.num_sms <= 0) TVM_FFI_THROW(RuntimeError) << "cannot read the SM count of the device";
    const TunedBmm<T>& kernel =
        choice >= 0 ? tuned[choice] : pick_tuned(tuned, num_tuned, m, n, batch, q.num_sms);
    if (dry_run) return std::string("sm90 ") + kernel.id;
    switch (kernel.run(q, scope.stream())) {
      case LaunchResult::kOk:
        return {};
      case LaunchResult::kUnsupported:  // CUTLASS refused it before launching: the general lane
        if (choice >= 0) {
          TVM_FFI_THROW(ValueError) << "sm90 " << kernel.id << " cannot implement this call";
        }
        break;
      default:
        check_cuda_status(cudaGetLastError(), variant);
        TVM_FFI_THROW(RuntimeError) << variant << " sm90 " << kernel.id << " failed for M=" << m
                                    << " N=" << n << " K=" << k << " batch=" << batch;
    }
  }
  const int small_n_max = align_ab == 1   ? kBmmSmallNAutoLoads1
                          : align_ab == 2 ? kBmmSmallNAutoLoads2
                                          : kBmmSmallNAuto;
  const bool small_n = n <= small_n_max;
  if (choice == kBmmSmallN || (choice == kBmmAuto && small_n)) {
    if (dry_run) return "small_n";
    const bool pairs = align_ab >= 2;  // 4-byte loads
    check_cuda_status(run_bmm_small_n<T, kBRowMajor>(strided, b0 * b1, pairs, scope.stream()),
                      variant);
    return {};
  }
  constexpr int64_t kMaxBatch = 65535;  // gridDim.z
  const bool wide = wide_bmm_tile<kBRowMajor>(align_ab, std::min(kMaxBatch, batch), m, n,
                                              num_sms(scope.device_id()));
  if (dry_run) {
    if (align_ab == 1) return "simt";
    return "sm80 " + std::to_string(align_ab) + "/" + std::to_string(align_c) +
           (wide ? " 128x128" : "");
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t first = 0; first < batch; first += kMaxBatch) {
      BmmProblem<T> q = p;
      q.batch = static_cast<int>(std::min(kMaxBatch, batch - first));
      q.a = a0 + o * outer_a + first * stride_a;
      q.b = b0p + o * outer_b + first * stride_b;
      q.d = d0 + o * outer_d + first * stride_d;
      dispatch_bmm<T, kBRowMajor>(q, align_ab, align_c, wide, scope.stream(), variant);
    }
  }
  return {};
}

}  // namespace oasr::gemm
