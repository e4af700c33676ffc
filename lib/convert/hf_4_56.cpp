// hf-4.56 (4.56.x; hf-4.57 covers 4.57 - 5.3 with the same conversion): the window becomes
// (W - 1, W - 1) (transformers #39408 -> #40163) and the position-ids route always flattens the
// ids (no last-position variant); otherwise as hf-4.55.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_56(const Call& c) { return late_forward(c, {}); }

}  // namespace ad::replay
