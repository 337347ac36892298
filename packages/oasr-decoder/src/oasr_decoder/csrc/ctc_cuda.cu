// Launchers of the GPU CTC decoders (module oasr_decoder_ctc_cuda): greedy collapse and the
// prefix beam search state machine (reset, advance by a chunk of frames, read the n-best,
// rebuild the maps after the pools grew). The kernels are in include/oasr/decoder/ctc_cuda.cuh;
// a chunk is one launch of the chunk kernel, whose CTAs find the frames' top-k
// (include/oasr/decoder/topk.cuh) while others advance the rows.
//
// The state of S streams is seven tensors, allocated by Python (ctc_cuda.py) and checked here
// on every call: counters [S, 5] int32, probs [S, 4, beam] float64, entries [S, 3, beam] int32,
// nodes [S, 3, capacity] int32, links [S, 2, capacity] int32, map_keys [S, slots] int64 and
// map_values [S, slots] int32 (slots a power of two >= 2 * capacity).
//
// Stream ids and lengths live on the device: the kernels cannot raise, so out-of-range values
// set a bit of the stream's status, which Python reads (oasr_decoder.ctc_cuda: check=True).
#include <algorithm>
#include <atomic>

#include "oasr/common/arch_facts.h"
#include "oasr/decoder/ctc_cuda.cuh"
#include "tvm_ffi_utils.h"

using namespace oasr;
using decoder::BeamState;

namespace {

constexpr int kAdvanceThreads = 128;

void check_int32_vector(const DeviceScope& scope, const TensorView& t, int64_t size,
                        const char* name) {
  scope.check_same_device(t, name);
  check_dtype(t, {kInt32}, name);
  check_ndim(t, 1, name);
  check_size(t, 0, size, name);
  check_contiguous(t, name);
}

const int32_t* optional_int32(const DeviceScope& scope, const OptionalTensor& t, int64_t size,
                              const char* name) {
  if (!t.has_value()) return nullptr;
  check_int32_vector(scope, *t, size, name);
  return reinterpret_cast<const int32_t*>(data_bytes(*t));
}

void check_state_tensor(const DeviceScope& scope, const TensorView& t, DLDataType dtype,
                        std::initializer_list<int64_t> shape, const char* name) {
  scope.check_same_device(t, name);
  check_dtype(t, {dtype}, name);
  check_ndim(t, static_cast<int>(shape.size()), name);
  int dim = 0;
  for (int64_t size : shape) check_size(t, dim++, size, name);
  check_contiguous(t, name);
}

BeamState check_state(const DeviceScope& scope, const TensorView& counters,
                      const TensorView& probs, const TensorView& entries, const TensorView& nodes,
                      const TensorView& links, const TensorView& map_keys,
                      const TensorView& map_values) {
  check_ndim(probs, 3, "probs");
  check_ndim(nodes, 3, "nodes");
  check_ndim(map_keys, 2, "map_keys");
  const int64_t streams = probs.size(0), beam = probs.size(2), capacity = nodes.size(2);
  const int64_t slots = map_keys.size(1);
  if (beam < 1 || beam > decoder::kMaxBeam) {
    TVM_FFI_THROW(ValueError) << "beam must be in [1, " << decoder::kMaxBeam << "], got " << beam;
  }
  if (capacity < 1 || capacity > INT32_MAX / 2 || streams > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "state pools of " << capacity << " nodes for " << streams
                              << " streams are out of range";
  }
  if (slots < 2 * capacity || (slots & (slots - 1)) != 0) {
    TVM_FFI_THROW(ValueError) << "map_keys must have a power-of-two number of slots >= 2 * "
                              << "capacity (" << 2 * capacity << "), got " << slots;
  }
  check_state_tensor(scope, counters, kInt32, {streams, decoder::kNumCounters}, "counters");
  check_state_tensor(scope, probs, kFloat64, {streams, 4, beam}, "probs");
  check_state_tensor(scope, entries, kInt32, {streams, 3, beam}, "entries");
  check_state_tensor(scope, nodes, kInt32, {streams, 3, capacity}, "nodes");
  check_state_tensor(scope, links, kInt32, {streams, 2, capacity}, "links");
  check_state_tensor(scope, map_keys, kInt64, {streams, slots}, "map_keys");
  check_state_tensor(scope, map_values, kInt32, {streams, slots}, "map_values");
  BeamState st{};
  st.num_streams = static_cast<int32_t>(streams);
  st.beam = static_cast<int32_t>(beam);
  st.capacity = static_cast<int32_t>(capacity);
  st.map_slots = slots;
  st.counters = reinterpret_cast<int32_t*>(data_bytes(counters));
  st.probs = reinterpret_cast<double*>(data_bytes(probs));
  st.entries = reinterpret_cast<int32_t*>(data_bytes(entries));
  st.nodes = reinterpret_cast<int32_t*>(data_bytes(nodes));
  st.links = reinterpret_cast<int32_t*>(data_bytes(links));
  st.map_keys = reinterpret_cast<unsigned long long*>(data_bytes(map_keys));
  st.map_values = reinterpret_cast<int32_t*>(data_bytes(map_values));
  return st;
}

// log_probs [R, T, V]: a float dtype, unit stride over V, on the scope's device.
void check_log_probs(const DeviceScope& scope, const TensorView& t) {
  scope.check_same_device(t, "log_probs");
  check_ndim(t, 3, "log_probs");
  check_last_dim_contiguous(t, "log_probs");
  if (t.size(2) < 1) TVM_FFI_THROW(ValueError) << "log_probs has an empty vocabulary (V = 0)";
  if (t.size(0) > INT32_MAX || t.size(1) > INT32_MAX || t.size(2) > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "log_probs " << shape_str(t) << " has a dim of 2^31 or more";
  }
}

int32_t check_blank(int64_t blank, int64_t vocab) {
  if (blank < 0 || blank >= vocab) {
    TVM_FFI_THROW(ValueError) << "blank must be a token id in [0, " << vocab << "), got " << blank;
  }
  return static_cast<int32_t>(blank);
}

decoder::HypothesisOut check_hypotheses(const DeviceScope& scope, const TensorView& tokens_out,
                                        const TensorView& frames_out,
                                        const TensorView& lengths_out,
                                        const TensorView& scores_out, int64_t rows) {
  check_state_tensor(scope, tokens_out, kInt32,
                     {rows, tokens_out.ndim() == 3 ? tokens_out.size(1) : -1,
                      tokens_out.ndim() == 3 ? tokens_out.size(2) : -1},
                     "tokens_out");
  const int64_t nbest = tokens_out.size(1), max_len = tokens_out.size(2);
  if (nbest < 1) TVM_FFI_THROW(ValueError) << "tokens_out must hold at least one hypothesis";
  if (max_len > INT32_MAX || nbest > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "tokens_out " << shape_str(tokens_out) << " is too large";
  }
  check_same_shape(frames_out, "frames_out", tokens_out, "tokens_out");
  check_state_tensor(scope, frames_out, kInt32, {rows, nbest, max_len}, "frames_out");
  check_state_tensor(scope, lengths_out, kInt32, {rows, nbest}, "lengths_out");
  check_state_tensor(scope, scores_out, kFloat64, {rows, nbest}, "scores_out");
  return {reinterpret_cast<int32_t*>(data_bytes(tokens_out)),
          reinterpret_cast<int32_t*>(data_bytes(frames_out)),
          reinterpret_cast<int32_t*>(data_bytes(lengths_out)),
          reinterpret_cast<double*>(data_bytes(scores_out)), static_cast<int32_t>(nbest),
          static_cast<int32_t>(max_len)};
}

// Room in the result kernel's shared memory for a stream's pools of up to kResultSmemEntries nodes
// and links (16 bytes each, in the opt-in shared memory); larger ones are walked in global memory.
constexpr int32_t kResultSmemEntries =
    (arch_facts(OASR_TARGET_SM).smem_per_block_optin_bytes - 1024) / 16;
constexpr size_t kResultSmemMaxBytes = size_t(kResultSmemEntries) * 4 * sizeof(int32_t);

// Lets the result kernel take up to kResultSmemMaxBytes of dynamic shared memory on the current
// device: once per device (the attribute belongs to the device's context), not on every call.
// Two threads may both set it the first time; that is harmless.
void allow_result_smem(int device) {
  static std::atomic<bool> done[kMaxDevices] = {};
  const bool known = device >= 0 && device < kMaxDevices;
  if (known && done[device].load(std::memory_order_relaxed)) return;
  check_cuda_status(cudaFuncSetAttribute(decoder::ctc_beam_result_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kResultSmemMaxBytes)),
                    "ctc_beam_result kernel (shared memory)");
  if (known) done[device].store(true, std::memory_order_relaxed);
}

// Blocks per stream for the per-slot loops of reset / rebuild.
dim3 slot_grid(int64_t streams, int64_t slots) {
  const int64_t per_stream = std::min<int64_t>((slots + 255) / 256, 64);
  return dim3(static_cast<unsigned>(streams), static_cast<unsigned>(per_stream));
}

}  // namespace

// Back to the empty prefix at frame 0: the streams listed (int32 [R]), or all.
void ctc_beam_reset(TensorView counters, TensorView probs, TensorView entries, TensorView nodes,
                    TensorView links, TensorView map_keys, TensorView map_values,
                    OptionalTensor streams) {
  DeviceScope scope(counters);
  const BeamState st =
      check_state(scope, counters, probs, entries, nodes, links, map_keys, map_values);
  const int64_t rows = streams.has_value() ? streams.value().size(0) : st.num_streams;
  const int32_t* ids = optional_int32(scope, streams, rows, "streams");
  if (rows == 0) return;
  const dim3 grid = slot_grid(rows, st.map_slots);
  decoder::ctc_beam_reset_kernel<<<grid, 256, 0, scope.stream()>>>(st, ids);
  OASR_CHECK_LAUNCH("ctc_beam_reset kernel");
}

// Every stream's map rebuilt from its nodes (the pools were copied into larger tensors).
void ctc_beam_rebuild_map(TensorView counters, TensorView probs, TensorView entries,
                          TensorView nodes, TensorView links, TensorView map_keys,
                          TensorView map_values) {
  DeviceScope scope(counters);
  const BeamState st =
      check_state(scope, counters, probs, entries, nodes, links, map_keys, map_values);
  if (st.num_streams == 0) return;
  check_cuda_status(cudaMemsetAsync(st.map_keys, 0xff, st.num_streams * st.map_slots * 8,
                                    scope.stream()),
                    "clearing the maps");
  const dim3 grid = slot_grid(st.num_streams, st.capacity);
  decoder::ctc_beam_rebuild_map_kernel<<<grid, 256, 0, scope.stream()>>>(st);
  OASR_CHECK_LAUNCH("ctc_beam_rebuild_map kernel");
}

// The chunk kernel's top-k CTAs: in all, and before the rows' CTAs.
struct ChunkProducers {
  int32_t first, all;
};

// producers 0: the default, which fills the SMs the rows leave idle and adds two per SM (at 64
// streams x 16 frames on the H200: one extra per SM took 109 us a chunk, two 103.6-106, three
// 103.8-105.8, four 107.6-108.2); at least a quarter of the SMs' worth start before the rows.
ChunkProducers chunk_producers(int device, int64_t rows, int64_t producers) {
  if (producers < 0 || producers > 65536) {
    TVM_FFI_THROW(ValueError) << "producers must be in [0, 65536] (0: the default), got "
                              << producers;
  }
  const int64_t sms = std::max(num_sms(device), 1);
  const int64_t idle = std::max<int64_t>(sms - rows, 0);
  const int64_t all = producers == 0 ? idle + 2 * sms : producers;
  return {static_cast<int32_t>(std::min(all, std::max({idle, sms / 4, int64_t(1)}))),
          static_cast<int32_t>(all)};
}

// Sets the chunk kernel's shared-memory carve-out (percent of the SM's) to room for the CTAs each
// SM takes of this grid, the rest left to L1; a call only when the value changes. Left to itself,
// the driver sizes shared memory for the most CTAs that could share an SM (6 of these), which
// leaves L1 about 23 KB: then the top-k's second pass over a row (20 KB at V 5000 float32)
// misses it (ncu: 4% L1 hits; 22% at 3 CTAs per SM, the default grid up to 132 rows). The
// function attribute, because ncu showed the per-launch one (cudaLaunchAttributePreferred-
// SharedMemoryCarveout) left the configuration unchanged on the H200's driver.
template <typename Kernel>
void set_chunk_carveout(Kernel kernel, int device, int64_t grid) {
  static std::atomic<int> cta_bytes{0};  // static shared memory + the driver's reserve, per CTA
  static std::atomic<int> applied[kMaxDevices] = {};  // the percent set + 1; 0: none yet
  int bytes = cta_bytes.load(std::memory_order_relaxed);
  if (bytes == 0) {
    cudaFuncAttributes attrs{};
    int reserved = 0;
    check_cuda_status(cudaFuncGetAttributes(&attrs, kernel), "ctc_beam_chunk kernel attributes");
    check_cuda_status(
        cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device),
        "reserved shared memory per block");
    bytes = static_cast<int>(attrs.sharedSizeBytes) + reserved;
    cta_bytes.store(bytes, std::memory_order_relaxed);
  }
  const int64_t sms = std::max(num_sms(device), 1);
  const int64_t need = (grid + sms - 1) / sms * bytes;
  const int64_t per_sm = arch_facts(OASR_TARGET_SM).smem_per_sm_bytes;
  const int percent = static_cast<int>(std::min<int64_t>(100, (100 * need + per_sm - 1) / per_sm));
  const bool known = device >= 0 && device < kMaxDevices;
  if (known && applied[device].load(std::memory_order_relaxed) == percent + 1) return;
  // Two threads may race here with different grids: the carve-out is a hint, either is correct.
  check_cuda_status(
      cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent),
      "ctc_beam_chunk kernel (shared-memory carve-out)");
  if (known) applied[device].store(percent + 1, std::memory_order_relaxed);
}

// Decodes frames [0, lengths[r]) of log_probs[r] into stream streams[r] (or r), in one launch.
// top [R, T, K] int64 with K in [min(V, 2 * beam + 1), min(V, kMaxTop)] and sync [3] int32: the
// launch's scratch, which must be all 0 (the launch leaves it so: allocate it zeroed once and
// reuse it). producers: the top-k CTAs, 0 for the default.
void ctc_beam_advance(TensorView counters, TensorView probs, TensorView entries, TensorView nodes,
                      TensorView links, TensorView map_keys, TensorView map_values,
                      TensorView log_probs, TensorView top, TensorView sync,
                      OptionalTensor lengths, OptionalTensor streams, int64_t blank,
                      double skip_log_threshold, int64_t producers) {
  DeviceScope scope(counters);
  const BeamState st =
      check_state(scope, counters, probs, entries, nodes, links, map_keys, map_values);
  check_log_probs(scope, log_probs);
  const int64_t rows = log_probs.size(0), frames = log_probs.size(1), vocab = log_probs.size(2);
  const int64_t top_k = top.ndim() == 3 ? top.size(2) : -1;
  check_state_tensor(scope, top, kInt64, {rows, frames, top_k}, "top");
  check_int32_vector(scope, sync, 3, "sync");
  const int64_t need = std::min<int64_t>(vocab, 2 * st.beam + 1);
  if (top_k < need || top_k > vocab || top_k > decoder::kMaxTop) {
    TVM_FFI_THROW(ValueError) << "top must hold K in [min(V, 2 * beam + 1) = " << need
                              << ", min(V, " << decoder::kMaxTop << ")] tokens per frame, got "
                              << top_k;
  }
  const int32_t* len = optional_int32(scope, lengths, rows, "lengths");
  const int32_t* ids = optional_int32(scope, streams, rows, "streams");
  if (!streams.has_value() && rows != st.num_streams) {
    TVM_FFI_THROW(ValueError) << "log_probs has " << rows << " rows but the state has "
                              << st.num_streams << " streams; pass the stream ids of the rows";
  }
  if (rows > st.num_streams) {
    TVM_FFI_THROW(ValueError) << "log_probs has " << rows << " rows, more than the "
                              << st.num_streams << " streams";
  }
  const int32_t blank_id = check_blank(blank, vocab);
  const ChunkProducers top_ctas = chunk_producers(scope.device_id(), rows, producers);
  // Items are counted in int32, with each top-k CTA's last grab past the end.
  if (rows * frames + int64_t(top_ctas.all) * kAdvanceThreads / kWarpSize > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "log_probs " << shape_str(log_probs)
                              << " has too many frames for one launch (rows * frames must be "
                              << "below about 2^31); decode it in chunks";
  }
  if (rows == 0 || frames == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(log_probs.dtype(), "log_probs", T, [&] {
    decoder::BeamChunk<T> in{};
    in.log_probs = reinterpret_cast<const T*>(data_bytes(log_probs));
    in.stride_row = log_probs.stride(0);
    in.stride_frame = log_probs.stride(1);
    in.num_rows = static_cast<int32_t>(rows);
    in.num_frames = static_cast<int32_t>(frames);
    in.vocab = static_cast<int32_t>(vocab);
    in.lengths = len;
    in.streams = ids;
    in.top = reinterpret_cast<unsigned long long*>(data_bytes(top));
    in.top_k = static_cast<int32_t>(top_k);
    in.blank = blank_id;
    in.skip_log_threshold = skip_log_threshold;
    const decoder::ChunkSync chunk_sync{reinterpret_cast<int32_t*>(data_bytes(sync)),
                                        top_ctas.first, top_ctas.all};
    const auto kernel = decoder::ctc_beam_chunk_kernel<T, kAdvanceThreads>;
    const int64_t grid = top_ctas.all + rows;
    set_chunk_carveout(kernel, scope.device_id(), grid);
    kernel<<<static_cast<unsigned>(grid), kAdvanceThreads, 0, scope.stream()>>>(st, in, chunk_sync);
    OASR_CHECK_LAUNCH("ctc_beam_chunk kernel");
  });
}

// The n-best of each stream listed (or all), best first: tokens / frames [R, N, L] (-1 past a
// hypothesis), lengths [R, N] (-1: the beam holds fewer than N), scores [R, N] float64, and each
// stream's status bits [R] (a hypothesis longer than L sets kOutOfCapacity).
void ctc_beam_result(TensorView tokens_out, TensorView frames_out, TensorView lengths_out,
                     TensorView scores_out, TensorView status_out, TensorView counters,
                     TensorView probs, TensorView entries, TensorView nodes, TensorView links,
                     TensorView map_keys, TensorView map_values, OptionalTensor streams) {
  DeviceScope scope(counters);
  const BeamState st =
      check_state(scope, counters, probs, entries, nodes, links, map_keys, map_values);
  const int64_t rows = streams.has_value() ? streams.value().size(0) : st.num_streams;
  const int32_t* ids = optional_int32(scope, streams, rows, "streams");
  const decoder::HypothesisOut out =
      check_hypotheses(scope, tokens_out, frames_out, lengths_out, scores_out, rows);
  check_int32_vector(scope, status_out, rows, "status_out");
  if (rows == 0) return;
  const int32_t smem_entries = std::min<int32_t>(st.capacity, kResultSmemEntries);
  const size_t smem = static_cast<size_t>(smem_entries) * 4 * sizeof(int32_t);
  if (smem > 48 * 1024) allow_result_smem(scope.device_id());
  decoder::ctc_beam_result_kernel<<<static_cast<unsigned>(rows), 128, smem, scope.stream()>>>(
      st, out, ids, reinterpret_cast<int32_t*>(data_bytes(status_out)), smem_entries);
  OASR_CHECK_LAUNCH("ctc_beam_result kernel");
}

// Greedy search from each frame's best token (top-1 ids and values [B, T], contiguous):
// collapse repeats, drop blanks, sum the values in frame order (float64).
void ctc_greedy_collapse(TensorView tokens_out, TensorView frames_out, TensorView lengths_out,
                         TensorView scores_out, TensorView status_out, TensorView best_ids,
                         TensorView best_vals, OptionalTensor lengths, int64_t blank,
                         int64_t vocab) {
  DeviceScope scope(tokens_out);
  check_ndim(best_ids, 2, "best_ids");
  const int64_t batch = best_ids.size(0), frames = best_ids.size(1);
  check_state_tensor(scope, best_ids, kInt32, {batch, frames}, "best_ids");
  scope.check_same_device(best_vals, "best_vals");
  check_same_shape(best_vals, "best_vals", best_ids, "best_ids");
  check_contiguous(best_vals, "best_vals");
  const decoder::HypothesisOut out =
      check_hypotheses(scope, tokens_out, frames_out, lengths_out, scores_out, batch);
  if (out.nbest != 1 || out.max_len != frames) {
    TVM_FFI_THROW(ValueError) << "tokens_out must be [B, 1, T] = [" << batch << ", 1, " << frames
                              << "], got " << shape_str(tokens_out);
  }
  check_int32_vector(scope, status_out, batch, "status_out");
  const int32_t* len = optional_int32(scope, lengths, batch, "lengths");
  if (batch > INT32_MAX || frames > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "best_ids " << shape_str(best_ids) << " is too large";
  }
  const int32_t blank_id = check_blank(blank, vocab);
  if (batch == 0) return;
  OASR_DISPATCH_FLOAT_DTYPE(best_vals.dtype(), "best_vals", T, [&] {
    decoder::GreedyArgs<T> a{};
    a.best_ids = reinterpret_cast<const int32_t*>(data_bytes(best_ids));
    a.best_vals = reinterpret_cast<const T*>(data_bytes(best_vals));
    a.lengths = len;
    a.batch = static_cast<int32_t>(batch);
    a.num_frames = static_cast<int32_t>(frames);
    a.blank = blank_id;
    a.out = out;
    a.status = reinterpret_cast<int32_t*>(data_bytes(status_out));
    constexpr int kWarpsPerBlock = 4;
    const unsigned blocks = static_cast<unsigned>((batch + kWarpsPerBlock - 1) / kWarpsPerBlock);
    decoder::ctc_greedy_collapse_kernel<T><<<blocks, 32 * kWarpsPerBlock, 0, scope.stream()>>>(a);
    OASR_CHECK_LAUNCH("ctc_greedy_collapse kernel");
  });
}
