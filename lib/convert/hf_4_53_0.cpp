// hf-4.53.0: the position-ids route additionally requires B == 1 (query_states.shape[0] == 1),
// so packed rows with B > 1 go dense; `_upad_input` cuts keys longer than the mask to its width
// and gathers with its own `_index_first_axis` (tensor indexing: an out-of-range index is an
// IndexError, no longer torch.gather's RuntimeError).
#include "convert/rules.hpp"

namespace ad::replay {

UpadOptions upad_options_4_53() {
  return {.truncate_keys_to_mask = true,
          .key_gather = GatherKind::indexing,
          .key_gather_where = "_flash_attention_forward > _upad_input > _index_first_axis"};
}

VarlenArgs hf_4_53_0(const Call& c) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, upad_options_4_53());
  } else if (c.batch == 1 && posids_route_taken_4_47(c)) {
    a = posids_route_4_47(c);
  } else {
    a = dense_call(c);
    if (c.position_ids && c.batch > 1) a.steps.push_back("position ids with B > 1: no varlen route");
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
