// Launchers of the CPU CTC decoders (module oasr_decoder_ctc_cpu): checks, then the framework-free
// searches of include/oasr/decoder/.
//
// Results are written into caller-allocated tensors (destination passing, outputs first): a
// hypothesis has at most one token per frame, so [.., L] buffers with L >= the frames decoded
// always suffice; unused slots are -1.
//
// Stateful things are TVM-FFI objects (tvm::ffi::Object subclasses, reference counted across
// the boundary, freed when Python drops the last reference): a ContextGraph (immutable, shareable
// between threads and streams) and a stream (a prefix beam search kept between chunks, guarded
// by a mutex because TVM-FFI releases the GIL during calls). They carry no reflection: Python
// sees opaque handles and only passes them back to this module's functions, which check their
// type. TVM-FFI's type table is process-wide and keyed by name: two builds of this module loaded
// in one process (two cache keys) share each type and accept each other's handles. The keys
// therefore carry a layout version (".v1"): bump it whenever a class below changes layout.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/memory.h>
#include <tvm/ffi/object.h>

#include "oasr/decoder/context_graph.h"
#include "oasr/decoder/ctc_greedy_search.h"
#include "oasr/decoder/ctc_prefix_beam_search.h"
#include "tvm_ffi_utils.h"

using namespace oasr;
using tvm::ffi::ObjectRef;
using tvm::ffi::Optional;

namespace {

class ContextGraphObj : public tvm::ffi::Object {
 public:
  explicit ContextGraphObj(decoder::ContextGraph g) : graph(std::move(g)) {}
  const decoder::ContextGraph graph;

  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("oasr.decoder.ContextGraph.v1", ContextGraphObj,
                                    tvm::ffi::Object);
};

class CtcStreamObj : public tvm::ffi::Object {
 public:
  static constexpr bool _type_mutable = true;
  std::mutex mutex;
  decoder::CtcPrefixBeamSearchOptions options;
  ObjectRef graph;  // keeps options.context alive; null without a graph
  int64_t num_frames = 0;
  std::optional<decoder::CtcPrefixBeamSearch> search;  // made by the first chunk (it knows V)

  TVM_FFI_DECLARE_OBJECT_INFO_FINAL("oasr.decoder.CtcPrefixBeamSearchStream.v1", CtcStreamObj,
                                    tvm::ffi::Object);
};

// ---------------------------------------------------------------------------------------------
// checks

void check_cpu(const TensorView& t, const char* name) {
  if (t.device().device_type != kDLCPU) {
    TVM_FFI_THROW(ValueError) << name << " must be a CPU tensor, got device type "
                              << t.device().device_type
                              << "; the CPU decoders read host memory: call .cpu()";
  }
}

void check_output(const TensorView& t, DLDataType dtype, const char* name) {
  check_cpu(t, name);
  check_dtype(t, {dtype}, name);
  check_contiguous(t, name);
}

// log_probs: CPU float32 of `ndim` dims with a unit-stride vocabulary dim; returns V.
int64_t check_log_probs(const TensorView& t, int ndim) {
  check_cpu(t, "log_probs");
  if (!same_dtype(t.dtype(), kFloat32)) {
    TVM_FFI_THROW(TypeError) << "log_probs has dtype " << dtype_name(t.dtype())
                             << "; the CPU decoders take float32: call .float()";
  }
  check_ndim(t, ndim, "log_probs");
  check_last_dim_contiguous(t, "log_probs");
  const int64_t vocab = t.size(-1);
  if (vocab < 1) TVM_FFI_THROW(ValueError) << "log_probs has an empty vocabulary (V = 0)";
  if (vocab > INT32_MAX) TVM_FFI_THROW(ValueError) << "log_probs has more than 2^31 - 1 tokens";
  if (ndim >= 2 && t.size(-2) > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "log_probs has more than 2^31 - 1 frames";
  }
  return vocab;
}

int32_t check_blank(int64_t blank, int64_t vocab) {
  if (blank < 0 || blank >= vocab) {
    TVM_FFI_THROW(ValueError) << "blank must be a token id in [0, " << vocab << "), got " << blank;
  }
  return static_cast<int32_t>(blank);
}

int32_t check_beam_size(int64_t beam_size) {
  if (beam_size < 1 || beam_size > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "beam_size must be at least 1, got " << beam_size;
  }
  return static_cast<int32_t>(beam_size);
}

// log(threshold), or +inf (skip nothing) without one.
double skip_log_threshold(const Optional<double>& threshold) {
  if (!threshold.has_value()) return std::numeric_limits<double>::infinity();
  const double p = *threshold;
  if (!(p > 0.0 && p <= 1.0)) {
    TVM_FFI_THROW(ValueError) << "blank_skip_threshold must be a probability in (0, 1], got " << p
                              << "; pass None to skip no frame";
  }
  return std::log(p);
}

const decoder::ContextGraph* as_graph(const ObjectRef& ref, const char* name) {
  const ContextGraphObj* obj = ref.as<ContextGraphObj>();
  if (obj == nullptr) {
    TVM_FFI_THROW(TypeError) << name << " must be a context graph made by context_graph_create, "
                             << "got " << ref.GetTypeKey();
  }
  return &obj->graph;
}

// The graph's tokens must be non-blank ids of the vocabulary.
void check_graph_fits(const decoder::ContextGraph* graph, int64_t vocab, int32_t blank) {
  if (graph == nullptr) return;
  if (graph->max_token() >= vocab) {
    TVM_FFI_THROW(ValueError) << "context_graph has token " << graph->max_token()
                              << ", outside the vocabulary of log_probs (V = " << vocab << ")";
  }
  if (graph->uses_token(blank)) {
    TVM_FFI_THROW(ValueError) << "context_graph has a phrase with the blank token " << blank
                              << "; phrases are sequences of non-blank tokens";
  }
}

CtcStreamObj* as_stream(const ObjectRef& ref) {
  CtcStreamObj* obj = const_cast<CtcStreamObj*>(ref.as<CtcStreamObj>());
  if (obj == nullptr) {
    TVM_FFI_THROW(TypeError) << "stream must be a stream made by ctc_stream_create, got "
                             << ref.GetTypeKey();
  }
  return obj;
}

// Raises if frames [0, frames) hold NaN or +inf (row0: frame first_frame of the utterance).
void check_finite(const float* row0, int64_t frames, int64_t vocab, int64_t row_stride,
                  const std::string& where, int64_t first_frame = 0) {
  const int64_t bad = decoder::find_invalid_log_prob(row0, frames, vocab, row_stride);
  if (bad >= 0) {
    TVM_FFI_THROW(ValueError) << "log_probs" << where << " has NaN or +inf at frame "
                              << first_frame + bad / vocab << ", token " << bad % vocab
                              << "; pass log-probabilities (log_softmax of the logits)";
  }
}

// lengths: CPU int64 [B] with 0 <= lengths[b] <= T; returns its values.
std::vector<int64_t> check_lengths(const TensorView& lengths, int64_t batch, int64_t num_frames) {
  check_cpu(lengths, "lengths");
  check_dtype(lengths, {kInt64}, "lengths");
  check_ndim(lengths, 1, "lengths");
  check_size(lengths, 0, batch, "lengths");
  const int64_t* data = reinterpret_cast<const int64_t*>(data_bytes(lengths));
  std::vector<int64_t> out(batch);
  for (int64_t b = 0; b < batch; ++b) {
    out[b] = data[b * lengths.stride(0)];
    if (out[b] < 0 || out[b] > num_frames) {
      TVM_FFI_THROW(ValueError) << "lengths[" << b << "] = " << out[b] << " is outside [0, T = "
                                << num_frames << "]";
    }
  }
  return out;
}

const float* frame_row(const TensorView& log_probs, int64_t b, int64_t t) {
  return reinterpret_cast<const float*>(data_bytes(log_probs)) + b * log_probs.stride(0) +
         t * log_probs.stride(1);
}

// Caller-allocated results: tokens, frames [..., L] int32 (L >= the frames decoded),
// num_tokens [...] int32, scores [...] float64, contiguous on the CPU.
struct HypothesisOutputs {
  int32_t* tokens;
  int32_t* frames;
  int32_t* num_tokens;
  double* scores;
  int64_t capacity;  // L
};

// `lead` is the expected shape of num_tokens_out (-1: any size); tokens_out is lead + [L].
HypothesisOutputs check_outputs(const TensorView& tokens_out, const TensorView& frames_out,
                                const TensorView& num_tokens_out, const TensorView& scores_out,
                                std::initializer_list<int64_t> lead) {
  check_output(tokens_out, kInt32, "tokens_out");
  check_output(frames_out, kInt32, "frames_out");
  check_output(num_tokens_out, kInt32, "num_tokens_out");
  check_output(scores_out, kFloat64, "scores_out");
  const int ndim = static_cast<int>(lead.size());
  check_ndim(tokens_out, ndim + 1, "tokens_out");
  check_ndim(num_tokens_out, ndim, "num_tokens_out");
  int dim = 0;
  for (int64_t size : lead) {
    if (size >= 0) check_size(tokens_out, dim, size, "tokens_out");
    check_size(num_tokens_out, dim, tokens_out.size(dim), "num_tokens_out");
    ++dim;
  }
  check_same_shape(frames_out, "frames_out", tokens_out, "tokens_out");
  check_same_shape(scores_out, "scores_out", num_tokens_out, "num_tokens_out");
  return {reinterpret_cast<int32_t*>(data_bytes(tokens_out)),
          reinterpret_cast<int32_t*>(data_bytes(frames_out)),
          reinterpret_cast<int32_t*>(data_bytes(num_tokens_out)),
          reinterpret_cast<double*>(data_bytes(scores_out)), tokens_out.size(-1)};
}

// Every utterance fits the outputs. (Values are vetted by the searches as they read each frame.)
void check_capacity(const std::vector<int64_t>& len, int64_t capacity, const char* layout) {
  for (size_t b = 0; b < len.size(); ++b) {
    if (len[b] > capacity) {
      TVM_FFI_THROW(ValueError) << "tokens_out holds " << capacity << " tokens per hypothesis "
                                << "but lengths[" << b << "] = " << len[b] << "; allocate "
                                << layout;
    }
  }
}

// Raises for frame `bad` (>= 0) of utterance b, which a search found to hold NaN or +inf; the
// message names utterance batch_offset + b (a shard of the caller's batch starts at its offset).
void raise_if_invalid(const TensorView& log_probs, int64_t b, int64_t batch_offset, int64_t bad) {
  if (bad >= 0) {
    check_finite(frame_row(log_probs, b, bad), 1, log_probs.size(2), log_probs.stride(1),
                 "[" + std::to_string(batch_offset + b) + "]", bad);
  }
}

// Writes hypotheses into `slots` rows of the outputs (from row `first`): tokens, then -1.
void write_hypotheses(const std::vector<decoder::CtcHypothesis>& hyps, int64_t first,
                      int64_t slots, const HypothesisOutputs& out) {
  for (int64_t n = 0; n < slots; ++n) {
    const int64_t row = first + n;
    int32_t* tok = out.tokens + row * out.capacity;
    int32_t* frm = out.frames + row * out.capacity;
    std::fill(tok, tok + out.capacity, -1);
    std::fill(frm, frm + out.capacity, -1);
    if (n < static_cast<int64_t>(hyps.size())) {
      const decoder::CtcHypothesis& h = hyps[n];
      std::copy(h.tokens.begin(), h.tokens.end(), tok);
      std::copy(h.frames.begin(), h.frames.end(), frm);
      out.num_tokens[row] = static_cast<int32_t>(h.tokens.size());
      out.scores[row] = h.score;
    } else {
      out.num_tokens[row] = 0;
      out.scores[row] = decoder::kNegInf;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// greedy search

void ctc_greedy_search(TensorView tokens_out, TensorView frames_out, TensorView num_tokens_out,
                       TensorView scores_out, TensorView log_probs, TensorView lengths,
                       int64_t blank, int64_t batch_offset) {
  const int64_t vocab = check_log_probs(log_probs, 3);
  const int64_t batch = log_probs.size(0);
  const int32_t blank_id = check_blank(blank, vocab);
  const std::vector<int64_t> len = check_lengths(lengths, batch, log_probs.size(1));
  const HypothesisOutputs out =
      check_outputs(tokens_out, frames_out, num_tokens_out, scores_out, {batch});
  check_capacity(len, out.capacity, "[B, max(lengths)]");

  decoder::CtcGreedyResult result;
  for (int64_t b = 0; b < batch; ++b) {
    raise_if_invalid(log_probs, b, batch_offset,
                     decoder::ctc_greedy_search(frame_row(log_probs, b, 0), len[b], vocab,
                                                log_probs.stride(1), blank_id, &result));
    write_hypotheses({{result.tokens, result.frames, result.score}}, b, 1, out);
  }
}

// ---------------------------------------------------------------------------------------------
// prefix beam search over a batch

void ctc_prefix_beam_search(TensorView tokens_out, TensorView frames_out,
                            TensorView num_tokens_out, TensorView scores_out,
                            TensorView num_hyps_out, TensorView log_probs, TensorView lengths,
                            int64_t beam_size, int64_t blank,
                            Optional<double> blank_skip_threshold,
                            Optional<ObjectRef> context_graph, int64_t batch_offset) {
  const int64_t vocab = check_log_probs(log_probs, 3);
  const int64_t batch = log_probs.size(0);
  decoder::CtcPrefixBeamSearchOptions options;
  options.beam_size = check_beam_size(beam_size);
  options.blank = check_blank(blank, vocab);
  options.blank_skip_log_threshold = skip_log_threshold(blank_skip_threshold);
  if (context_graph.has_value()) options.context = as_graph(*context_graph, "context_graph");
  check_graph_fits(options.context, vocab, options.blank);
  const std::vector<int64_t> len = check_lengths(lengths, batch, log_probs.size(1));
  const HypothesisOutputs out =
      check_outputs(tokens_out, frames_out, num_tokens_out, scores_out, {batch, -1});
  const int64_t nbest = tokens_out.size(1);
  if (nbest < 1 || nbest > beam_size) {
    TVM_FFI_THROW(ValueError) << "nbest (tokens_out.shape[1]) must be in [1, beam_size = "
                              << beam_size << "], got " << nbest;
  }
  check_output(num_hyps_out, kInt32, "num_hyps_out");
  check_ndim(num_hyps_out, 1, "num_hyps_out");
  check_size(num_hyps_out, 0, batch, "num_hyps_out");
  check_capacity(len, out.capacity, "[B, nbest, max(lengths)]");

  int32_t* num_hyps = reinterpret_cast<int32_t*>(data_bytes(num_hyps_out));
  decoder::CtcPrefixBeamSearch search(options, vocab);
  for (int64_t b = 0; b < batch; ++b) {
    search.reset();
    raise_if_invalid(log_probs, b, batch_offset,
                     search.accept(frame_row(log_probs, b, 0), len[b], log_probs.stride(1)));
    const std::vector<decoder::CtcHypothesis> hyps = search.nbest(nbest, /*final=*/true);
    num_hyps[b] = static_cast<int32_t>(hyps.size());
    write_hypotheses(hyps, b * nbest, nbest, out);
  }
}

// ---------------------------------------------------------------------------------------------
// context graph

ObjectRef context_graph_create(TensorView tokens, TensorView offsets, TensorView bonuses) {
  check_cpu(tokens, "tokens");
  check_cpu(offsets, "offsets");
  check_cpu(bonuses, "bonuses");
  check_dtype(tokens, {kInt32}, "tokens");
  check_dtype(offsets, {kInt64}, "offsets");
  check_dtype(bonuses, {kFloat64}, "bonuses");
  check_ndim(tokens, 1, "tokens");
  check_ndim(offsets, 1, "offsets");
  check_ndim(bonuses, 1, "bonuses");
  check_contiguous(tokens, "tokens");
  check_contiguous(offsets, "offsets");
  check_contiguous(bonuses, "bonuses");
  const int64_t num_phrases = bonuses.size(0);
  check_size(offsets, 0, num_phrases + 1, "offsets");
  const int32_t* tok = reinterpret_cast<const int32_t*>(data_bytes(tokens));
  const int64_t* off = reinterpret_cast<const int64_t*>(data_bytes(offsets));
  const double* bonus = reinterpret_cast<const double*>(data_bytes(bonuses));
  if (off[0] != 0 || off[num_phrases] != tokens.size(0)) {
    TVM_FFI_THROW(ValueError) << "offsets must run from 0 to len(tokens) = " << tokens.size(0);
  }
  for (int64_t p = 0; p < num_phrases; ++p) {
    if (off[p + 1] <= off[p]) {
      TVM_FFI_THROW(ValueError) << "phrase " << p << " is empty (offsets must increase)";
    }
    if (!std::isfinite(bonus[p])) {
      TVM_FFI_THROW(ValueError) << "phrase " << p << " has a bonus of " << bonus[p]
                                << "; bonuses must be finite";
    }
    for (int64_t i = off[p]; i < off[p + 1]; ++i) {
      if (tok[i] < 0) {
        TVM_FFI_THROW(ValueError) << "phrase " << p << " has a negative token id " << tok[i];
      }
    }
  }
  return ObjectRef(tvm::ffi::make_object<ContextGraphObj>(
      decoder::ContextGraph(tok, off, bonus, num_phrases)));
}

double context_graph_score(ObjectRef graph, TensorView tokens, bool final) {
  const decoder::ContextGraph* g = as_graph(graph, "graph");
  check_cpu(tokens, "tokens");
  check_dtype(tokens, {kInt32}, "tokens");
  check_ndim(tokens, 1, "tokens");
  check_contiguous(tokens, "tokens");
  return g->score(reinterpret_cast<const int32_t*>(data_bytes(tokens)), tokens.size(0), final);
}

// [num_nodes, num_phrases, max_token]
tvm::ffi::Array<int64_t> context_graph_info(ObjectRef graph) {
  const decoder::ContextGraph* g = as_graph(graph, "graph");
  return {g->num_nodes(), g->num_phrases(), g->max_token()};
}

// ---------------------------------------------------------------------------------------------
// streaming prefix beam search

ObjectRef ctc_stream_create(int64_t beam_size, int64_t blank,
                            Optional<double> blank_skip_threshold,
                            Optional<ObjectRef> context_graph) {
  auto stream = tvm::ffi::make_object<CtcStreamObj>();
  stream->options.beam_size = check_beam_size(beam_size);
  if (blank < 0) TVM_FFI_THROW(ValueError) << "blank must be a token id >= 0, got " << blank;
  stream->options.blank = static_cast<int32_t>(blank);
  stream->options.blank_skip_log_threshold = skip_log_threshold(blank_skip_threshold);
  if (context_graph.has_value()) {
    stream->options.context = as_graph(*context_graph, "context_graph");
    stream->graph = *context_graph;
  }
  return ObjectRef(stream);
}

// Decodes the chunk log_probs [T, V]; V must match the stream's first chunk.
void ctc_stream_accept(ObjectRef stream, TensorView log_probs) {
  CtcStreamObj* s = as_stream(stream);
  const int64_t vocab = check_log_probs(log_probs, 2);
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->search.has_value() && s->search->vocab() != vocab) {
    TVM_FFI_THROW(ValueError) << "log_probs has V = " << vocab << " but the stream's earlier "
                              << "chunks had V = " << s->search->vocab();
  }
  if (!s->search.has_value()) {
    check_blank(s->options.blank, vocab);
    check_graph_fits(s->options.context, vocab, s->options.blank);
  }
  const int64_t num_frames = log_probs.size(0);
  if (s->num_frames + num_frames > INT32_MAX) {
    TVM_FFI_THROW(ValueError) << "a stream decodes at most 2^31 - 1 frames; reset() it";
  }
  // Vetted before the state moves, so a refused chunk leaves the stream as it was.
  check_finite(frame_row(log_probs, 0, 0), num_frames, vocab, log_probs.stride(0), "");
  if (!s->search.has_value()) s->search.emplace(s->options, vocab);
  s->search->accept(frame_row(log_probs, 0, 0), num_frames, log_probs.stride(0));
  s->num_frames += num_frames;
}

// Writes the n-best so far into tokens/frames [N, L] (L >= frames decoded), num_tokens [N],
// scores [N]; returns how many hypotheses there are. final: the end-of-utterance scores.
int64_t ctc_stream_result(ObjectRef stream, TensorView tokens_out, TensorView frames_out,
                          TensorView num_tokens_out, TensorView scores_out, bool final) {
  CtcStreamObj* s = as_stream(stream);
  const HypothesisOutputs out =
      check_outputs(tokens_out, frames_out, num_tokens_out, scores_out, {-1});
  const int64_t nbest = tokens_out.size(0);
  std::lock_guard<std::mutex> lock(s->mutex);
  if (nbest < 1 || nbest > s->options.beam_size) {
    TVM_FFI_THROW(ValueError) << "nbest (tokens_out.shape[0]) must be in [1, beam_size = "
                              << s->options.beam_size << "], got " << nbest;
  }
  if (out.capacity < s->num_frames) {
    TVM_FFI_THROW(ValueError) << "tokens_out holds " << out.capacity << " tokens per hypothesis "
                              << "but the stream has decoded " << s->num_frames << " frames";
  }
  std::vector<decoder::CtcHypothesis> hyps;
  if (s->search.has_value()) {
    hyps = s->search->nbest(nbest, final);
  } else {
    hyps.push_back({{}, {}, 0.0});  // nothing decoded: the empty prefix, probability 1
  }
  write_hypotheses(hyps, 0, nbest, out);
  return static_cast<int64_t>(hyps.size());
}

void ctc_stream_reset(ObjectRef stream) {
  CtcStreamObj* s = as_stream(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  s->search.reset();
  s->num_frames = 0;
}

int64_t ctc_stream_num_frames(ObjectRef stream) {
  CtcStreamObj* s = as_stream(stream);
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->num_frames;
}
