// hf-4.49 (4.49 - 4.52): as hf-4.47, but `_upad_input` unpacks flash-attn's unpad_input with
// `*_`, so flash-attn >= 2.7 (five return values) no longer breaks a partial query.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_49(const Call& c) { return forward_4_47(c, false); }

}  // namespace ad::replay
