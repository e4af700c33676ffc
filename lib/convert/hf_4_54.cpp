// hf-4.54 (4.54.x and 4.55.0): any position ids (or the four kwargs) select the varlen route, whatever B,
// Lq or the ids look like: plain rows, decode steps and offsets all become "packed". max_seqlen
// is cu_seqlens.diff().max().item(), so ids without a 0 (an offset chunk, a decode step) leave
// cu = [numel] and max() of the empty diff raises (transformers#39814).
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_54(const Call& c) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, upad_options_4_53());
  } else if (c.position_ids || all_kwargs(c)) {
    if (!c.kwargs || !c.kwargs->cu_seq_lens_q || !c.kwargs->cu_seq_lens_k)
      a = packed_from_position_ids(c, Boundary::zero, MaxRule::diff_item,
                                   "_flash_attention_forward > _prepare_from_posids");
    else
      a = kwargs_path(c);
  } else {
    a = dense_call(c);
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
