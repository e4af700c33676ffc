// The host-side rules of kernels/kernel_params.hpp that decide how a kernel may touch an
// operand: here, which operands the tensor memory accelerator may load (tma_operand_ok).
#include <catch2/catch.hpp>

#include <cstdint>

#include "kernel_params.hpp"

using namespace ad;

TEST_CASE("kernel params: the tensor memory accelerator takes aligned operands with rows below 2^31",
          "[kernels]") {
  alignas(64) static unsigned char storage[64];
  const kern::KeyOperand k{storage, 4096, 8};
  CHECK(kern::tma_operand_ok(k, 128, 2));
  CHECK(kern::tma_operand_ok(k, 64, 2));
  // the base off a 16-byte boundary (cuTensorMapEncodeTiled's global address rule)
  CHECK_FALSE(kern::tma_operand_ok(kern::KeyOperand{storage + 8, 4096, 8}, 128, 2));
  CHECK(kern::tma_operand_ok(kern::KeyOperand{storage + 16, 4096, 8}, 128, 2));
  // rows past the signed 32-bit coordinates of cp.async.bulk.tensor
  CHECK(kern::tma_operand_ok(kern::KeyOperand{storage, (int64_t(1) << 31) - 1, 8}, 128, 2));
  CHECK_FALSE(kern::tma_operand_ok(kern::KeyOperand{storage, int64_t(1) << 31, 8}, 128, 2));
  // a head dim that is not whole 64-column (128-byte) boxes, fp32 elements, nothing to load
  CHECK_FALSE(kern::tma_operand_ok(k, 96, 2));
  CHECK_FALSE(kern::tma_operand_ok(k, 128, 4));
  CHECK_FALSE(kern::tma_operand_ok(kern::KeyOperand{nullptr, 4096, 8}, 128, 2));
  CHECK_FALSE(kern::tma_operand_ok(kern::KeyOperand{storage, 0, 8}, 128, 2));
  CHECK_FALSE(kern::tma_operand_ok(kern::KeyOperand{storage, 4096, 0}, 128, 2));
  // the query role follows the same rule
  CHECK(kern::tma_operand_ok(kern::QueryOperand{storage, 4096, 32}, 128, 2));
}
