// An engine executes the kernel stages of one call and says what it observed; the stage
// driver (run/driver.hpp) runs an ExecPlan through an engine, in the real program's order, and
// turns the observations into stage records and violations (run/observe.hpp), the same for
// every engine. Two engines: the checked CPU twins (cpu/cpu_engine.cpp) and the checked CUDA
// kernels (cuda/cuda_engine.cpp). Internal to lib/exec.
//
// An engine holds the call's tensors between stages (source -> packed -> rotated -> output
// -> final). Every observation is plain data in the contract's vocabulary
// (contract/access_record.hpp): refused accesses as AccessRecords, counts, and `facts`, a
// JSON object of what only this engine knows (the CUDA kernel's name, the CPU's tile count),
// merged into the stage record as it is; where the CUDA engine ran a stage on the CPU twin,
// its `engine`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/access_record.hpp"
#include "exec/plan/plan.hpp"
#include "vocab/stage.hpp"

namespace ad {

// The tensors an unpad gather packs (k and v share indices_k).
enum class Operand : uint8_t { q, k, v };

// The call's inputs in the source frame: seeded values in the batch's dtype (plan/numeric.hpp),
// filled once by the driver; the reference reads them too.
struct Inputs {
  std::vector<float> q_src, k_src, v_src;
  std::vector<float> qv_src;  // FA3's q_v (q's shape; empty without q_v): the explicit path, no gather
};

// The rotary cos/sin table the call passes (table_rows x half), in the dtype.
struct RotaryTable {
  std::vector<float> cos, sin;
};

struct GatherObservation {
  AccessRecord out_of_range;  // indices outside the source rows: not gathered
  EngineFacts facts;
  StageEngine engine = StageEngine::unspecified;
};

// One rotary call (q or k).
struct RotaryCallObservation {
  AccessRecord outside_tensor;  // past the ends of the tensor (not performed)
  AccessRecord outside_head;    // inside the tensor, outside the row's head (performed: corruption)
  AccessRecord table;           // cos/sin reads outside the table (not performed)
  int64_t rotated = 0;          // (row, head) pairs rotated
  int64_t past_table = 0;       // (row, head) pairs at a position past the table: left unrotated
  int64_t not_visited = 0;      // rows no program visited (flash_attn's grid from max_seqlen)
};
struct RotaryObservation {
  RotaryCallObservation q, k;
  EngineFacts facts;
  StageEngine engine = StageEngine::unspecified;
};

struct AttentionObservation {
  AccessRecord access;           // attention.access
  std::vector<uint32_t> writes;  // per packed row of out: the segments (CTAs of head 0) that wrote it
  std::vector<uint8_t> computed; // per packed row: its value is known (computed or zero-filled)
  std::string detail;            // what the engine did differently (sampling)
  EngineFacts facts;
  StageEngine engine = StageEngine::unspecified;
};

struct ScatterObservation {
  AccessRecord out_of_range;      // indices outside the padded rows: not scattered
  int64_t rows_written = 0;
  std::vector<int64_t> source_of; // final row -> packed row written there (-1: none)
  EngineFacts facts;
  StageEngine engine = StageEngine::unspecified;
};

// The varlen backward (contract/fa2_backward.hpp): dot_do_o, dq_dk_dv and convert_dQ, run on
// the packed dO (the driver gathers it from the seeded final-frame dO: pad_input's adjoint)
// and on the engine's own forward results: q and k as rotated, v, out and the LSE. Every
// access checked and refused when out of bounds (never performed), each launch its record.
// dq_accum holds the release's offsets (fa2::bwd::dq_accum_offset): an access at a wrapped
// offset that lands inside dq_accum is performed there (the rows it lands on are corrupted as
// on the real stack), one that lands outside is refused.
struct DqMisroute {
  int64_t rows = 0;              // packed q rows whose dq went through a dq_accum tile at an offset
                                 // other than the intended one (any launch, any head)
  int64_t first_row = -1;        // the first of them, its segment, head and m block
  int64_t segment = -1, head = -1, m_block = -1;
  int64_t intended = 0;          // dq_accum element offset of that tile: intended (64-bit) ...
  int64_t offset = 0;            // ... and as the release computed it (dq_dk_dv's)
};

struct AttentionBackwardObservation {
  // false: this engine has no backward; the stage says so ("not run"), never "ok".
  bool ran = false;
  std::string not_run;                  // why it did not run
  AccessRecord dot_do_o, dq_dk_dv, convert_dq;  // refused accesses per launch (launch order within each)
  std::vector<uint32_t> dq_writes;      // per packed q row: convert_dQ CTAs of head 0 that wrote its dq
  std::vector<uint32_t> dkv_writes;     // per packed k row: dq_dk_dv key blocks of head 0 that wrote its
                                        // dk/dv (the zeros of an empty key block included)
  std::vector<uint8_t> dq_misrouted;    // per packed q row: 1 when counted in `misroute`
  DqMisroute misroute;
  // The gradients the kernels return, packed frame: dq (total_q x H x D), dk and dv
  // (total_k x Hk x D, summed over the head group under GQA). A row no kernel wrote keeps the
  // poison (NaN) that stands for torch.empty's contents.
  std::vector<float> dq, dk, dv;
  std::string detail;                   // what the engine did differently (sampling)
  EngineFacts facts;
  StageEngine engine = StageEngine::unspecified;
};

// What the caller receives, on the host: the final output (rows_final x H x D) and the LSE.
struct Output {
  const float* out_final = nullptr;
  const std::vector<float>* lse = nullptr;
};

// The rotary's adjoint on a packed gradient g (rows, heads, D) of q (`is_q`) or k, in place:
// the forward's rotary call with conjugate=True (each pair rotated by the opposite angle), as
// the real stack's autograd runs it before the gradients reach the source tensors. The stage
// driver runs it on the host after every engine's backward: the CPU twin of the rotary kernel
// (cpu/cpu_stages.cpp). An empty g is left as it is.
void host_rotary_adjoint(const ExecPlan& plan, const RotaryTable& table, bool is_q, std::vector<float>& g, int64_t rows,
                         int64_t heads, int threads);

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;            // "cpu" | "cuda"
  virtual std::string output_name() const = 0;     // how the report calls the output it checks
  // Takes the source tensors (the engine may copy them; `in` outlives the run).
  virtual void load(const ExecPlan& plan, const Inputs& in) = 0;
  // index_first_axis of one operand (plan.unpad.q for q, plan.unpad.k for k and v).
  virtual GatherObservation gather(const ExecPlan& plan, Operand which) = 0;
  // The rotary call on the packed q, then k (plan.rotary, enabled and not raising).
  virtual RotaryObservation rotary(const ExecPlan& plan, const RotaryTable& table) = 0;
  // The varlen forward (plan.attention, not raising); with zero_fill, the host's zero fill.
  virtual AttentionObservation attention(const ExecPlan& plan) = 0;
  // pad_input (plan.pad, enabled).
  virtual ScatterObservation scatter(const ExecPlan& plan) = 0;
  // The final output and the LSE, valid until the engine is destroyed.
  virtual Output output(const ExecPlan& plan) = 0;
  // The varlen backward (plan.backward enabled, after attention): `dout` is the packed dO
  // (total_q x H x D) in the dtype. An engine without a backward keeps this default: the
  // stage reports that it did not run on this engine.
  virtual AttentionBackwardObservation attention_backward(const ExecPlan& plan, const std::vector<float>& dout) {
    (void)plan;
    (void)dout;
    AttentionBackwardObservation ob;
    ob.not_run = std::string("the varlen backward is not implemented on the ") + name() + " engine";
    return ob;
  }
};

}  // namespace ad
