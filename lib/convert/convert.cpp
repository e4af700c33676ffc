// convert(): the replayed release conversion next to the batch file's explicit arguments.
#include "convert/convert.hpp"

namespace ad {

Conversion convert(const Batch& batch, const ConvertOptions& options) {
  (void)options;
  Conversion c;
  if (batch.varlen) c.explicit_args = explicit_varlen_args(batch);
  return c;
}

}  // namespace ad
