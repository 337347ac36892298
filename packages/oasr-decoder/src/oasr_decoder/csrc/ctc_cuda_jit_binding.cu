// TVM-FFI exports of the oasr_decoder_ctc_cuda module.
#include "tvm_ffi_utils.h"

void ctc_beam_reset(TensorView counters, TensorView probs, TensorView entries, TensorView nodes,
                    TensorView links, TensorView map_keys, TensorView map_values,
                    OptionalTensor streams);
void ctc_beam_rebuild_map(TensorView counters, TensorView probs, TensorView entries,
                          TensorView nodes, TensorView links, TensorView map_keys,
                          TensorView map_values);
void ctc_beam_advance(TensorView counters, TensorView probs, TensorView entries, TensorView nodes,
                      TensorView links, TensorView map_keys, TensorView map_values,
                      TensorView log_probs, TensorView top, TensorView sync,
                      OptionalTensor lengths, OptionalTensor streams, int64_t blank,
                      double skip_log_threshold, int64_t producers);
void ctc_beam_result(TensorView tokens_out, TensorView frames_out, TensorView lengths_out,
                     TensorView scores_out, TensorView status_out, TensorView counters,
                     TensorView probs, TensorView entries, TensorView nodes, TensorView links,
                     TensorView map_keys, TensorView map_values, OptionalTensor streams);
void ctc_greedy_collapse(TensorView tokens_out, TensorView frames_out, TensorView lengths_out,
                         TensorView scores_out, TensorView status_out, TensorView best_ids,
                         TensorView best_vals, OptionalTensor lengths, int64_t blank,
                         int64_t vocab);

TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_beam_reset, ctc_beam_reset);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_beam_rebuild_map, ctc_beam_rebuild_map);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_beam_advance, ctc_beam_advance);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_beam_result, ctc_beam_result);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ctc_greedy_collapse, ctc_greedy_collapse);
