// TVM-FFI exports of the oasr_decoder_ctc_cpu module (host C++, no CUDA).
#include <tvm/ffi/container/array.h>

#include "tvm_ffi_utils.h"

using tvm::ffi::ObjectRef;
using tvm::ffi::Optional;

void ctc_greedy_search(TensorView tokens_out, TensorView frames_out, TensorView num_tokens_out,
                       TensorView scores_out, TensorView log_probs, TensorView lengths,
                       int64_t blank, int64_t batch_offset);
void ctc_prefix_beam_search(TensorView tokens_out, TensorView frames_out,
                            TensorView num_tokens_out, TensorView scores_out,
                            TensorView num_hyps_out, TensorView log_probs, TensorView lengths,
                            int64_t beam_size, int64_t blank,
                            Optional<double> blank_skip_threshold,
                            Optional<ObjectRef> context_graph, int64_t batch_offset);
ObjectRef context_graph_create(TensorView tokens, TensorView offsets, TensorView bonuses);
double context_graph_score(ObjectRef graph, TensorView tokens, bool final);
tvm::ffi::Array<int64_t> context_graph_info(ObjectRef graph);
ObjectRef ctc_stream_create(int64_t beam_size, int64_t blank,
                            Optional<double> blank_skip_threshold,
                            Optional<ObjectRef> context_graph);
void ctc_stream_accept(ObjectRef stream, TensorView log_probs);
int64_t ctc_stream_result(ObjectRef stream, TensorView tokens_out, TensorView frames_out,
                          TensorView num_tokens_out, TensorView scores_out, bool final);
void ctc_stream_reset(ObjectRef stream);
int64_t ctc_stream_num_frames(ObjectRef stream);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_greedy_search, ctc_greedy_search);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_prefix_beam_search, ctc_prefix_beam_search);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(context_graph_create, context_graph_create);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(context_graph_score, context_graph_score);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(context_graph_info, context_graph_info);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_stream_create, ctc_stream_create);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_stream_accept, ctc_stream_accept);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_stream_result, ctc_stream_result);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_stream_reset, ctc_stream_reset);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_stream_num_frames, ctc_stream_num_frames);
