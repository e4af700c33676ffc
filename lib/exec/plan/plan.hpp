// ExecPlan: the one validated description of a call that an execution backend receives
// (docs/spec/execution.md). Built on the host by make_exec_plan() from the batch and
// the conversion; every policy decision is taken here (which stages run, what the release
// raises on the host, the kernel flags after flash-attn's host adjustments, tile sizes,
// sampling under the budget, the memory bound), so a backend only executes it.
//
// Stability: the CUDA backend is written against this struct. Fields are only ever added,
// never renamed or re-purposed.
//
// Frames. Three row spaces appear below:
//  - source: the tensors the framework held before the call: q (rows_q_src = B*Lq on the
//    mask path, or the packed rows on other paths), k and v (rows_k_src).
//  - packed: what the varlen kernel receives: q/out with total_q rows, k/v with total_k rows.
//  - final: what the caller gets back: the padded (B*Lq) output on the mask path (after
//    pad_input), the packed output otherwise.
// Every tensor is row-major (rows, heads, head_dim), contiguous.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "exec/exec.hpp"
#include "contract/access_record.hpp"
#include "contract/fa2_backward.hpp"
#include "contract/fa2_forward.hpp"
#include "contract/fa3_paged.hpp"
#include "contract/vocabulary.hpp"
#include "exec/plan/numeric.hpp"

namespace ad {

// The buffers a backend allocates and checks accesses against are `Buffer`
// (contract/vocabulary.hpp): q_rot/k_rot alias q/k when rotary is off, out_final aliases out
// off the mask path.

// A failure the library raises on the host before launching anything (Python assert,
// TORCH_CHECK, a reshape, a launch-configuration error). The stage that raises does not run
// and the stages after it are not reached, as in the real program.
struct HostRaise {
  std::string where;    // "flash_attn_varlen_func > mha_varlen_fwd"
  std::string type;     // "RuntimeError", "AssertionError"
  std::string message;  // the library's message
};

// One unpad gather: dst[i] = src[indices[i]] for i < indices.size() (index_first_axis).
struct GatherPlan {
  bool enabled = false;          // false: the packed tensor is the source viewed as rows
  std::vector<int64_t> indices;  // as the release computed them (int64 like torch.nonzero)
  int64_t src_rows = 0;          // rows of the (B*L) view gathered from
  int64_t dst_rows = 0;          // rows of the gathered tensor (= indices.size())
};

struct UnpadPlan {
  GatherPlan q;  // q gather
  GatherPlan k;  // k and v gather (same indices)
};

// The rotary call on the packed q and k. Positions are either computed by the kernel from
// cu_seqlens and offsets (flash_attn/fla with varlen), or given per packed row (hf, and the
// non-varlen form, where positions are those of the padded tensor the call was made on).
struct RotaryPlan {
  bool enabled = false;
  RotaryContract contract = RotaryContract::flash_attn;
  int64_t dim = 0;            // as passed to RotaryEmbedding(dim=...)
  int64_t half = 0;           // cos/sin columns: ceil(dim / 2); the kernel rotates 2*half columns
  bool interleaved = false;
  double base = 10000.0;
  int64_t table_rows = 0;     // rows of the cos/sin table the kernel receives (flash_attn, fla)
  bool varlen = false;        // kernel positions from cu_seqlens (else positions_q/k)
  // varlen: the cu_seqlens each call receives (int32 as read), its max_seqlen (flash_attn's
  // grid), and the offsets (one scalar, or one per sequence when offsets_per_sequence).
  std::vector<int32_t> cu_q, cu_k;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  bool offsets_per_sequence = false;
  std::vector<int64_t> offsets_q, offsets_k;  // size 1 (scalar) or one per segment
  // non-varlen / hf: the position of every packed row.
  std::vector<int64_t> positions_q, positions_k;
  // non-varlen on the mask path: rotary runs on the padded tensor before the unpad gather
  // (transformers' models, FLA's layers without cu_seqlens), so the padding rows the gather
  // drops are rotated too. Their (padded row, position) pairs, for the table reads they make.
  std::vector<std::pair<int64_t, int64_t>> dropped_rows_q, dropped_rows_k;
  int64_t block_rows = 0;     // rows per program: flash_attn BLOCK_M, fla BT
  bool inplace = true;        // flash_attn layer rotates in place; fla writes a new tensor
  std::optional<HostRaise> raises;
  std::string note;
};

// The attention CTAs that lie wholly past the q/out rows (plan/clip.cpp): not run by either
// engine; their accesses, all out of bounds, counted on the host.
struct TilesPastRows {
  AccessRecord access;   // first in launch order, and the count
  int64_t tiles = 0;     // CTAs not run
  int64_t segments = 0;  // segments that have such CTAs
  int64_t first_segment = -1;
  int64_t live_grid_m = 0;  // m blocks that cover every CTA with a row inside q/out
};

// Attention CTAs (m, b, h) whose rows all lie at or past the q/out rows
// (fa2::tile_past_rows): their q reads, out writes, k/v reads and LSE writes past the buffers,
// counted from a plan whose attention part is built (clip.cpp).
TilesPastRows attention_tiles_past_rows(const ExecPlan& plan);
// One line for the report: the segments that run past q and what the stages did about it
// ("" when none does).
std::string clipped_note(const ExecPlan& plan);

// flash_attn_varlen_func as the kernel runs it, after mha_varlen_fwd's host adjustments.
// FA3's paged KV (`varlen.page_table` with its values): k / v are the pool (num_pages *
// page_size rows) and key j of segment b is read through the table (contract/fa3_paged.hpp).
struct PagedPlan {
  std::vector<int64_t> table;  // rows x pages_per_seq, row-major
  int64_t pages_per_seq = 0, page_size = 1, num_pages = 0;
  fa3::PagedKV view() const {
    return {table.data(), static_cast<int64_t>(table.size()), pages_per_seq, page_size, num_pages};
  }
};

struct AttentionPlan {
  int64_t num_segments = 0;              // batch_size = cu_seqlens_q.numel() - 1 (grid.y)
  std::vector<int32_t> cu_seqlens_q;     // as the kernel reads them (int32 view)
  std::vector<int32_t> cu_seqlens_k;
  std::optional<std::vector<int32_t>> seqused_k;
  std::optional<std::vector<int32_t>> seqused_q;  // FA3 / FA4: query rows used per segment
  int family = 2;                        // flash-attn family whose host adjustments ran (2, 3, 4)
  int32_t max_seqlen_q = 0;              // as the kernel uses it (swapped path: ngroups)
  int32_t max_seqlen_k = 0;
  int64_t total_q = 0, total_k = 0;      // rows of q/out and of k/v
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  fa2::GpuArch arch = fa2::GpuArch::sm90;
  fa2::Tile tile{};                      // FA2 tile for the head dim
  fa2::Flags flags{};                    // causal/local/window/block sizes as compiled
  int64_t grid_m = 0, grid_b = 0, grid_h = 0;  // (ceil(max_seqlen_q / BLOCK_M), N, H)
  float softmax_scale = 0.f;             // 1/sqrt(head_dim)
  float softcap = 0.f;                   // 0: off
  bool swapped = false;                  // seqlenq_ngroups_swapped (max_seqlen_q == 1, H > Hk)
  int64_t ngroups = 1;                   // H / Hk
  bool unpadded_lse = true;              // (H, total_q) from 2.6.0; before: (N, H, max_seqlen_q)
  int64_t lse_elements = 0;
  // Segment b as the kernel addresses it.
  fa2::Segment segment(int64_t b) const {
    return fa2::segment(cu_seqlens_q.data(), cu_seqlens_k.data(), seqused_k ? seqused_k->data() : nullptr, b, swapped,
                        static_cast<int32_t>(ngroups), seqused_q ? seqused_q->data() : nullptr);
  }
  // Packed q rows past seqused_q[b] inside their segment (FA3 / FA4 compute and write only the
  // first seqused_q[b] rows): 1 per such row, empty without seqused_q.
  std::vector<uint8_t> rows_past_seqused_q() const;
  fa2::LseShape lse_shape() const {
    return {unpadded_lse ? fa2::LseLayout::unpadded : fa2::LseLayout::padded, total_q > 0 ? total_q : 0, num_heads,
            max_seqlen_q};
  }
  bool zero_fill = false;                // max_seqlen_k <= 0: the host zero-fills O, LSE = +inf
  std::optional<HostRaise> raises;
  // Sampling under the budget: rows of the packed q to compute (empty: all rows).
  std::vector<uint8_t> sample;
  int64_t rows_sampled = 0;              // rows flagged in `sample` (or total_q)
  TilesPastRows past_rows;               // CTAs wholly past q/out: counted, not run
  // FA3: k / v addressed through a page table (total_k: the pool's rows), and the q_v score
  // term (each score adds q_v . v_j; q_v has q's shape)
  std::optional<PagedPlan> paged;
  bool qv = false;
};

// pad_input: out_final = zeros(dst_rows); out_final[indices[i]] = out[i].
struct PadPlan {
  bool enabled = false;          // false: the final output is the packed output
  std::vector<int64_t> indices;  // indices_q
  int64_t dst_rows = 0;          // B * Lq
};

// One intended sequence as the reference computes it. Rows are contiguous in each frame.
struct RefSequence {
  int64_t index = 0;        // into batch.intent.sequences
  int64_t row = 0, start = 0, length = 0;  // as the intent says
  int64_t k_src_first = 0;  // source rows of its keys/values: [k_src_first, +k_count)
  int64_t k_count = 0;
  int64_t q_src_first = 0;  // source rows of its queries: [q_src_first, +q_count)
  int64_t q_count = 0;
  int64_t q_final_first = 0;  // final-output rows of its queries
  int64_t q_key_first = 0;  // key index (within the sequence) aligned with its first query
  int64_t q_packed_first = -1;  // packed row expected to hold its first query (-1: unknown)
};

// Attention computed directly over the intended sequences, in fp64, on the same source
// inputs, with the rotary the model means (its dim capped at head_dim, positions restarting
// per sequence) applied in fp64 and rounded to the dtype.
struct ReferencePlan {
  bool enabled = false;
  std::string skip_reason;
  std::vector<RefSequence> sequences;
  bool causal = true;
  int64_t window_left = -1, window_right = -1;  // inclusive, -1 unlimited
  int64_t attention_chunk = 0;                  // FA3's attention_chunk as passed: the model's chunked
                                                // attention (keys of the query's own chunk only)
  double softcap = 0.0;
  double softmax_scale = 0.0;
  double tolerance = 0.0;                       // relative, per dtype
  bool rotary = false;
  int64_t rotary_dim = 0;                       // rotated columns (even, <= head_dim)
  bool rotary_interleaved = false;
  double rotary_base = 10000.0;
  int64_t rotary_freq_dim = 0;                  // inv_freq = base^(-2i / rotary_freq_dim)
  // FA3's paged KV: a sequence's k_src_first is its logical block (segment * seqlen_k); key
  // j of it is row j % page_size of page table[segment][j / page_size] of the pool, within
  // the sequence's own row of the table (the page table's meaning, not the kernel's reads)
  std::optional<PagedPlan> paged;
  int64_t paged_seqlen_k = 0;                   // pages_per_seq * page_size
  int64_t paged_outside_pool = 0;               // sequences left out: a page of theirs is outside the pool
  bool qv = false;                              // scores add q_v . v_j (FA3's q_v)
  // Sampling: final-frame rows to check (empty: all intended query rows).
  std::vector<uint8_t> sample;
  int64_t rows_total = 0;                       // intended query rows
  int64_t rows_sampled = 0;
};

// The varlen backward of a training batch (mha_varlen_bwd, contract/fa2_backward.hpp), run
// after the forward stages on the engine's forward results with a seeded dO.
struct BackwardPlan {
  bool enabled = false;                  // batch.pass == training
  fa2::bwd::Release release;             // the release's rules (flash_attn_release)
  fa2::bwd::Normalized kernel;           // windows, tile, grids, nsplits as the launches run them
  fa2::bwd::DqAccumShape dq_accum;       // fp32 accumulator (nsplits, total_q + 128 N, H, d_rounded)
  fa2::bwd::SoftmaxDShape softmax_d;     // rowsum(dO * O), fp32
  bool deterministic = false;
  std::optional<HostRaise> raises;       // mha_varlen_bwd's own host checks (none beyond the forward's yet)
  std::string skip_reason;               // non-empty: the stage is skipped and says why
  // Sampling under the budget: packed q rows whose dq is computed / key rows whose dk, dv are
  // (empty: all). Offsets, coverage and accesses are checked for every row.
  std::vector<uint8_t> sample_q, sample_k;
  double tolerance = 0.0;                // gradient reference, relative, per dtype
};

struct MemoryEstimate {
  int64_t bytes = 0;              // host bytes the CPU backend allocates (fp32 storage)
  int64_t elements = 0;           // tensor elements over all buffers
};

struct ExecPlan {
  std::string skip_reason;        // non-empty: no dynamic stage runs (stages "skipped")
  VarlenPath path = VarlenPath::dense;
  std::string function;           // "flash_attn_varlen_func" | "flash_attn_func"
  Api api = Api::flash_attn_2_varlen;  // the API that received the call (KernelCall::api)
  Version flash_attn_release;     // rules applied, e.g. 2.6.3 (the default when unknown)
  std::optional<Version> torch_release;  // environment.torch (torch.varlen_attn's rules)
  DType dtype = DType::bf16;
  ElemType elem = ElemType::bf16;          // storage type of q/k/v/out
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t rows_q_src = 0, rows_k_src = 0;  // source frame rows
  int64_t rows_final = 0;                  // final output rows
  int64_t batch_size = 0, query_length = 0, kv_length = 0;  // the padded frame (B, Lq, Lk); 0 without a batch block
  uint64_t seed = 0;
  // The release fails while converting (VarlenArgs::failure): the stages up to `fails_at`
  // run, the rest are not reached.
  std::optional<HostRaise> conversion_failure;
  std::optional<Stage> fails_at;  // the stage that raises (unpad) when conversion_failure
  UnpadPlan unpad;
  RotaryPlan rotary;
  AttentionPlan attention;
  PadPlan pad;
  ReferencePlan reference;
  BackwardPlan backward;
  MemoryEstimate memory;
  int64_t budget = 0;             // multiply-adds allowed before sampling
  int64_t cost = 0;               // multiply-adds of attention + reference over all rows
  bool sampled = false;
  int threads = 1;                // worker threads the CPU backend uses
  std::vector<std::string> notes;

};

// Builds the plan. Never throws for bad metadata (that is what the plan describes); throws
// std::logic_error only for a conversion that contradicts itself.
ExecPlan make_exec_plan(const Batch& batch, const Conversion& conversion, const ExecOptions& options);

// The kernel's flags and grid (max_seqlen_q as it uses it, grid_m x grid_b x grid_h) from the
// call as the host normalised it; at.tile and at.num_segments set, max_k as passed. Shared by
// make_exec_plan and the direct call (exec/cpu/direct.hpp).
void set_attention_grid(AttentionPlan& at, const fa2::Normalized& n, int64_t max_k);
// The backward's kernel geometry and workspaces (dq_accum, softmax_d) for the forward planned
// in p.attention, p.backward's release and deterministic set: max_q is max_seqlen_q as passed
// (the forward's swapped path is its own), causal and the window as passed.
void plan_backward_kernel(ExecPlan& p, int64_t max_q, bool causal, int64_t window_left, int64_t window_right);

// The stage records of a plan whose dynamic stages cannot run (skip_reason set).
std::vector<StageRecord> skipped_stages(const std::string& why, bool training = false);

// The dynamic stages, in the order they run. An inference batch runs the first kForwardStages;
// a training batch ("pass": "training") all of them.
inline constexpr Stage kDynamicStages[] = {Stage::unpad,     Stage::rotary, Stage::attention,
                                            Stage::pad, Stage::result, Stage::attention_backward};
inline constexpr size_t kForwardStages = 5;
inline size_t stage_count(bool training) { return training ? std::size(kDynamicStages) : kForwardStages; }

}  // namespace ad
