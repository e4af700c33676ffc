// The symptom table: what each invariant's violation does on the real stack, per case, per
// release and per pass. ONE table: every outcome and every basis the tool can predict is a
// row here, so measured goldens (tests/golden/oracle) revise rows, not code. Checks that know
// the amounts pick a case (`variant`) and fill in the message and rows; everything else gets
// the id's default row ("" for an error, "warning" for a warning: a latent violation).
//
// basis: "report owner/repo#N" where a public report shows the symptom, "model" where it is
// reasoned from the kernel's source (cited in `when` and in the check), "golden <id>" once the
// oracle measured it.
#include <algorithm>

#include "predict/predict.hpp"
#include "vocab/host_checks.hpp"

namespace ad {

namespace {

using O = Outcome;
using P = Pass;
using M = Moment;

// What flash-attn 2's host check raises, as the user reads it ("RuntimeError: ..."): the
// message is the host-check table's (vocab/host_checks.cpp).
std::string_view fa2_raise(HostCheck c) { return fa2_host_checks().find(c)->raised(); }

constexpr std::string_view kIllegal = "CUDA error: an illegal memory access was encountered";
constexpr std::string_view kAssert = "CUDA error: device-side assert triggered";

const std::vector<SymptomRow>& table() {
  // {invariant, variant, library, from, to, training_only, outcome, pass, at, message, basis, when}
  static const std::vector<SymptomRow> t = {
      // ---- inputs: flash-attn's host checks raise before any launch -------------------------
      {"input.dtype", "", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::q_dtype), "golden fa2-fp32-qkv",
       "mha_varlen_fwd's dtype check (flash_api.cpp)"},
      {"input.head_dim", "", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::head_dim_max), "golden fa2-head-dim-512",
       "the release's head-dim check"},
      {"input.head_dim", "warning", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; FA2 pads the head dim to a multiple of 8 (q, k, v and out copied on every call)", "model",
       "an unaligned head dim FA2 pads"},
      {"input.gqa", "", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::heads_divide), "golden fa2-gqa-heads-not-divisible",
       "mha_varlen_fwd's head-count check"},
      {"input.feature", "", "", "", "", false, O::raises, P::forward, M::attention,
       "TypeError: flash_attn_varlen_func() got an unexpected keyword argument 'softcap'", "model",
       "the call passes a feature the release lacks, or a combination it rejects"},
      {"input.feature", "signature", "", "", "", false, O::raises, P::forward, M::attention,
       "TypeError: varlen_attn() got an unexpected keyword argument 'seqused_k'", "golden oracle-torch-varlen-seqused-k",
       "torch.varlen_attn given an argument its release's signature does not take"},
      {"input.feature", "dropped", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; transformers drops the feature silently, so the outputs differ from what the model computes", "model",
       "a missing sliding window the batch's key ranges exceed; softcap dropped by transformers 4.55 - 5.17"},
      {"input.feature", "chunk_backward", "", "", "", true, O::raises, P::backward, M::backward,
       "AssertionError: FA3 backward does not support attention_chunk", "model",
       "FA3's autograd backward asserts attention_chunk == 0 (hopper/flash_attn_interface.py)"},
      {"input.feature", "qv_backward", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; dq, dk and dv miss q_v's score term and q_v gets no gradient", "model",
       "FA3's autograd backward passes no q_v to the kernel (hopper/flash_attn_interface.py)"},
      {"input.feature", "kvcache_backward", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; UserWarning: an autograd kernel was not registered; no gradient flows through the attention", "model",
       "flash_attn_with_kvcache has no autograd kernel: torch's autograd fallback returns undefined gradients"},
      {"input.feature", "cute_varlen_backward", "", "", "", true, O::raises, P::backward, M::backward,
       "NotImplementedError: Backward pass for FlashAttention with variable length sequences is not implemented yet.",
       "model",
       "the flash_attn/cute copy bundled in flash-attn 2.8.3 - 2.8.3.post2 has no varlen backward "
       "(flash_attn/cute/interface.py FlashAttnVarlenFunc.backward raises)"},
      {"input.feature", "warning", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the feature is dropped but does not change this batch's outputs", "model",
       "a missing window no key range of the batch exceeds; dropout without a dropout argument"},
      // input.int32_range (checks_input.cpp): the forward's q/k/v/out offsets are 64-bit in every
      // FA2 release (flash.h index_t); the backward's dq accumulator offset is not.
      {"input.int32_range", "dq_accum_offset", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; dq is wrong for the segments that start past the 32-bit dq_accum offset", "model",
       "FA2's backward computes the dq_accum offset of a varlen segment as cu_seqlens_q[b] x H x d_rounded in 32 "
       "bits (flash_bwd_kernel.h, block_info.h q_offset with int strides; fixed on main by "
       "Dao-AILab/flash-attention#2260, in no 2.x release up to 2.8.3)"},
      {"input.int32_range", "dq_accum_tile", "flash_attn", "", "2.8.0", true, O::illegal_address, P::backward,
       M::backward, kIllegal, "report Dao-AILab/flash-attention#1500",
       "before 2.8.0 the tile offset (m_block x kBlockM + 128 x b) x H x d_rounded of dq_accum is an int product"},
      {"input.int32_range", "dense", "", "", "", false, O::illegal_address, P::forward, M::attention, kIllegal,
       "report Dao-AILab/flash-attention#767",
       "a padded (non-varlen) call whose tensors pass 2^31 elements, or an offset past 2^31 on a 32-bit path"},
      {"input.int32_range", "offsets_64bit", "", "", "", false, O::ok, P::forward, M::attention,
       "no error reported for FA3/FA4 at this size (64-bit offsets); kernels around them may still index in 32 bits",
       "model", "FA3 (hopper/flash.h int64 strides) and FA4"},

      // ---- conversion -----------------------------------------------------------------------
      {"mask.rank", "", "", "", "", false, O::device_assert, P::forward, M::gather, kAssert,
       "report Dao-AILab/flash-attention#1156", "the key gather reads past B x Lk"},
      {"mask.rank", "cu_shape", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::cu_seqlens_q_shape), "report Dao-AILab/flash-attention#742",
       "no gather index passes B x Lk: flash-attn rejects the rank-3 cu_seqlens"},
      {"position_ids.rank", "index_error", "", "", "", false, O::raises, P::forward, M::conversion,
       "IndexError: tuple index out of range", "report huggingface/transformers#43441",
       "(S,) position ids on a release whose _is_packed_sequence reads position_ids.shape[1] (4.55 onward)"},
      {"mask.rank", "cu_shape_first", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::cu_seqlens_q_shape), "report Dao-AILab/flash-attention#1857",
       "the key gather reads past B x Lk, but its device assert is reported at the next synchronisation and "
       "nothing synchronises before flash-attn rejects the rank-3 cu_seqlens"},
      {"mask.rank", "pad_0d", "", "", "", false, O::raises, P::forward, M::conversion,
       "RuntimeError: Padding length should be less than or equal to two times the input dimension but got padding "
       "length 2 and input of dimension 0",
       "model",
       "a rank-1 mask: its lengths are 0-d and the unpad helper's F.pad(cumsum(lengths), (1, 0)) raises (torch "
       "aten/src/ATen/native/PadNd.cpp _pad_enum) before flash-attn is called"},
      // seqused_k.range and input.softcap (checks_kernel_values.cpp): values mha_varlen_fwd passes
      // to the kernel unchecked
      {"seqused_k.range", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the sequences with a negative seqused_k attend to no key: their output rows are zeros", "model",
       "block_info.h actual_seqlen_k = seqused_k[b] < 0: n_block_max <= 0, flash_fwd_kernel.h writes zeros"},
      // seqused_q.range (checks_kernel_values.cpp): FA3 / FA4 take the count unchecked
      {"seqused_q.range", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the sequences with a negative seqused_q compute no row: their output rows keep torch.empty's contents",
       "model", "hopper/seqlen.h seqlen_q = seqused_q[b] < 0: no m-block runs, flash_api.cpp out = torch::empty"},
      {"seqused_q.range", "past_segment", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the rows past the segment are computed as this sequence's and overwrite the next segment's outputs",
       "model", "hopper/seqlen.h seqlen_q = seqused_q[b] past cu_seqlens_q[b + 1] - cu_seqlens_q[b]"},
      {"seqused_q.range", "shape", "", "", "", false, O::raises, P::forward, M::attention,
       "RuntimeError: seqused_q must have shape (batch_size)", "model",
       "hopper/flash_api.cpp mha_fwd CHECK_SHAPE(seqused_q, batch_size); FA4 asserts the same"},
      // window.fa4_resolution (checks_kernel_values.cpp): FA4's reading of the window passed
      {"window.fa4_resolution", "full", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the window is dropped and every row attends to every key of its segment",
       "golden oracle-fa4-4.0.0b19-sm90-window-minus1-0-not-causal",
       "FA4 4.0.0b4 - 4.0.0b29: (left, right) summing below 0 is no window"},
      {"window.fa4_resolution", "empty", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the window holds no key and every output row of the call is zeros",
       "golden oracle-fa4-4.0.0b36-sm90-window-minus1-0-not-causal",
       "FA4 4.0.0b30 onward: (left, right) with left + right < 0 and a side >= 0 is a local window with no key"},
      {"window.fa4_resolution", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; rows attend to another band of keys than the window meant", "model",
       "FA4 takes a negative side next to a non-negative one as passed (flash_attn/cute/mask.py)"},
      // page_table.* (checks_kernel_values.cpp): FA3's paged KV, indices the kernel does not bound
      {"page_table.index", "", "", "", "", false, O::out_of_bounds, P::forward, M::attention,
       "no error; the kernel reads k_cache / v_cache rows outside the pool as keys and values (another allocation's "
       "values, or an illegal memory access past the mapped memory)",
       "model", "hopper/paged_kv.h takes the page index from page_table without a bound"},
      {"page_table.coverage", "next_row", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the sequence's last keys are the next sequence's (its page_table row read past its end)", "model",
       "page_table[b][j // page_size] past the row reads row b + 1 (a contiguous table)"},
      {"page_table.coverage", "past_table", "", "", "", false, O::out_of_bounds, P::forward, M::attention,
       "no error; the last sequence reads page indices past the end of page_table, then whatever pages they name",
       "model", "page_table[b][j // page_size] past the last row reads past the table"},
      {"input.softcap", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; softmax_scale / softcap overflows to inf: uniform attention over the keys (NaN where a score is 0)",
       "model", "a subnormal float32 softcap (flash_api.cpp set_params_fprop, softmax.h apply_softcap)"},
      {"input.softcap", "flushed", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; softcap rounds to 0 as a float32 and the kernel runs without it", "model",
       "a softcap below half the smallest float32 subnormal"},
      {"mask.binary", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; cu_seqlens counts the segment ids' sum while the gather packs the non-zero tokens, so sequences "
       "are cut at the wrong rows",
       "golden oracle-segment-id-mask-4.57.6", "a mask holding segment ids"},
      {"mask.cast_to_bool", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the packed sequences of a row run as one sequence and attend to each other",
       "model",
       "segment ids cast to bool (or dropped) by the model's mask preparation: one segment per row reaches the "
       "kernel (cu_seqlens [0, 12] for three packed sequences, tests/golden/model-llama-4.53.3.json)"},
      {"mask.static_cache_slots", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; each query attends keys past its own position: the tokens after it and the cache's empty slots",
       "model",
       "a dense causal call with more keys than queries (tests/golden/model-llama-5.8.1.json, scenario "
       "static_cache_all_ones: q 6, k 8)"},
      {"mask.static_cache_slots", "raises", "", "", "", false, O::raises, P::forward, M::attention,
       "the model raises ValueError before any attention runs", "model",
       "transformers <= 4.47 with a static cache and flash_attention_2 (recorded on the real releases: "
       "tests/golden/model-llama-4.43.4.json, 4.47.1.json)"},
      {"mask.kv_length", "", "", "", "", false, O::device_assert, P::forward, M::gather, kAssert,
       "report Dao-AILab/flash-attention#1156", "the unpad indices pass B x Lk"},
      {"mask.padding_side", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the unpad slice mask[:, -Lq:] picks the wrong query positions: those output rows come back wrong "
       "(zeros where it picked padding)",
       "report huggingface/transformers#35032", "a partial query sliced with mask[:, -Lq:] on right padding"},
      {"position_ids.width", "", "", "", "", false, O::raises, P::forward, M::rotary,
       "RuntimeError: The size of tensor a must match the size of tensor b (the model's apply_rotary_pos_emb)",
       "report hiyouga/LlamaFactory#10736",
       "position ids narrower or wider than the tokens the model is given: the rotary cos/sin do not broadcast"},
      {"position_ids.origin", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; sequence boundaries are missed or invented, so sequences are merged or split",
       "report huggingface/transformers#47496", "position ids that do not start at the origin the release looks for"},
      {"route.packed_to_dense", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the dense kernel attends across the packed sequences of a row", "report hiyouga/EasyR1#494",
       "packed rows the release sends to the dense kernel"},
      {"route.partial_kwargs", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the release falls back to the dense kernel and attends across the packed sequences",
       "report huggingface/transformers#47170", "some but not all of the varlen kwargs"},
      // layers.same_boundaries (checks_layers.cpp): the linear-attention layers' boundaries differ
      {"layers.same_boundaries", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the linear-attention layers mix the packed sequences (or split one) that the attention layers keep "
       "apart", "model", "a GatedDeltaNet layer whose boundaries differ from the attention layers'"},
      {"layers.same_boundaries", "raises", "", "", "", false, O::raises, P::forward, M::attention,
       "the GatedDeltaNet layer raises", "model", "FLA's layer raises on the boundaries it was given"},
      {"layers.same_boundaries", "conv_empty_segment", "", "", "", false, O::raises, P::forward, M::attention,
       "RuntimeError: Only zero batch or zero channel inputs are supported", "report areal-project/AReaL#1103",
       "AReaL's GatedDeltaNet convolution fallback (nn.Conv1d per cu_seqlens segment) on an empty segment; the "
       "message measured on CPU with torch 2.4.0, 2.6.0 and 2.11.0 (tests/golden/conv1d-empty-segment.json)"},
      {"cu_seqlens.dtype", "", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::cu_seqlens_q_dtype), "golden oracle-cu-int64-causal", "mha_varlen_fwd's dtype check"},
      {"cu_seqlens.device", "", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::cu_seqlens_q_device), "report vllm-project/vllm#44180", "cu_seqlens on the CPU"},
      {"cu_seqlens.device", "other_gpu", "", "", "", false, O::illegal_address, P::forward, M::attention, kIllegal,
       "model", "cu_seqlens on another GPU: CHECK_DEVICE passes, the kernel reads across devices"},
      {"cu_seqlens.shape", "", "", "", "", false, O::raises, P::forward, M::attention,
       fa2_raise(HostCheck::cu_seqlens_q_shape), "report Dao-AILab/flash-attention#742",
       "mha_varlen_fwd's CHECK_SHAPE"},
      {"cu_seqlens.shape", "replay", "", "", "", false, O::raises, P::forward, M::conversion,
       "the release raises while building cu_seqlens", "report huggingface/transformers#39814",
       "the release's position-ids route fails on the cu_seqlens it built"},
      {"cu_seqlens.start", "", "", "", "", false, O::illegal_address, P::forward, M::attention, kIllegal, "golden oracle-cu-first-negative",
       "a negative start becomes a huge unsigned row offset (block_info.h)"},
      {"cu_seqlens.start", "positive", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the rows before cu_seqlens[0] are never written (torch.empty: stale values)", "model",
       "a positive start (PrimeIntellect-ai/prime-rl#2392 built one)"},
      {"cu_seqlens.monotonic", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the rows of a negative-length segment are never written and later segments overlap earlier ones",
       "model", "a decreasing cu_seqlens"},
      // cu_seqlens.total (checks_cu_seqlens.cpp): how far the accesses go decides.
      {"cu_seqlens.total", "over_in_segment", "", "", "", false, O::out_of_bounds, P::forward, M::attention,
       "no error; the intended rows come out right, but the kernel reads and writes rows past the tensors (inside "
       "the caching allocator's segment: memory corruption possible, compute-sanitizer reports it)",
       "model", "every access past the tensors stays inside the allocator segment the tensor sits in"},
      // In a training step the rows past the tensors do more than read and write out of bounds
      // (measured on an H100, PyTorch 2.11's FA2, bench/results/oracle-h100-2026-11-26-overrun-training):
      // their output rows land in the memory right after `out`, where the allocator put the
      // forward's logsumexp, and their logsumexp in the next head's first rows ((H, total_q)
      // layout); the backward rescales every segment's probabilities with it.
      {"cu_seqlens.total", "over_in_segment", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; the forward's intended rows come out right, but its rows past the tensors write their outputs "
       "over the forward's logsumexp (allocated right after the output) and their logsumexp into the next head's "
       "first rows, so the backward rescales every segment with a corrupted logsumexp: dq, dk and dv come back "
       "wrong across segments (measured: dq in 13 of 16 rows, dk and dv in all, errors up to 1e35)",
       "golden oracle-cu-end-past-rows-by-3-training",
       "an overrun inside the allocator's segments in a training step"},
      {"cu_seqlens.total", "over_in_segment_keys", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the rows of the segment that runs past the key rows come out wrong (NaN where the memory past the "
       "tensor holds NaN), beside invalid reads and writes past the tensors",
       "golden oracle-torch-varlen-cu-end-past-rows",
       "torch.varlen_attn: cu_seqlens past the rows, inside the allocator segment, a segment reading keys past k/v"},
      {"cu_seqlens.total", "over_past_segment", "", "", "", false, O::illegal_address, P::forward, M::attention,
       kIllegal, "golden oracle-cu-phantom-segment-1m", "accesses reach past the allocator segment the tensor sits in"},
      {"cu_seqlens.total", "over_unreached", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the kernel's row tiles (ceil(max_seqlen / kBlockM)) end before the rows past the tensor", "model",
       "cu_seqlens[-1] past the rows, but max_seqlen keeps every access inside"},
      {"cu_seqlens.total", "under", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the rows past cu_seqlens[-1] are never written (torch.empty: stale values)",
       "golden oracle-cu-short-of-rows-intended-training",
       "cu_seqlens[-1] below the packed rows, which hold tokens the user meant"},
      {"cu_seqlens.total", "under", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; the gradients of the rows past cu_seqlens[-1] are never written (NaN gradients reported)",
       "report Dao-AILab/flash-attention#1661", "cu_seqlens[-1] below the packed rows"},
      // padding rows past cu_seqlens[-1]: the forward leaves only padding unwritten; the
      // backward's dq/dk/dv of those rows are stale (measured with the allocator's memory
      // holding NaN, as a training process's reused memory holds stale values)
      {"cu_seqlens.total", "under_padding", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; the intended rows and their gradients are right, but dq of the padding rows past "
       "cu_seqlens[-1] is never written and their dk/dv keep stale values (NaN when the memory held NaN)",
       "golden oracle-cu-short-of-rows-padding-training", "cu_seqlens[-1] below the packed rows, which are padding"},
      {"max_seqlen.type", "warning", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; FA2/FA3 convert the 0-d tensor to an int (a device->host sync, a graph break under torch.compile)",
       "model", "a 0-d tensor max_seqlen on FA2 or FA3"},
      {"max_seqlen.type", "", "", "", "", false, O::raises, P::forward, M::attention,
       "the call fails on a max_seqlen that is not a host int (FA4's int arithmetic, or None)", "model",
       "a 0-d tensor on FA4, or max_seqlen None"},
      // max_seqlen.covers (checks_cu_seqlens.cpp): FA2's forward grid has ceil(max_seqlen_q /
      // kBlockM) row tiles; its key loop takes key blocks from the actual lengths; the backward
      // sizes its grids from max_seqlen_q and max_seqlen_k (flash_bwd_launch_template.h).
      {"max_seqlen.covers", "q_latent", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the forward's row tiles still cover every row of the segment", "model",
       "max_seqlen_q below a segment that fits the ceil(max_seqlen_q / kBlockM) row tiles"},
      {"max_seqlen.covers", "q_rows", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the rows past the forward's row tiles are never computed (torch.empty: stale finite values)",
       "golden oracle-max-seqlen-64-segment-200", "a segment longer than ceil(max_seqlen_q / kBlockM) x kBlockM rows"},
      {"max_seqlen.covers", "q_backward", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; dq rows past the backward's ceil(max_seqlen_q / kBlockM) row tiles are never converted", "model",
       "the backward sizes dot_do_o and convert_dQ grids from max_seqlen_q"},
      {"max_seqlen.covers", "k_latent", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the forward takes key blocks from the actual lengths", "model",
       "max_seqlen_k below a segment: the forward without split-KV"},
      {"max_seqlen.covers", "k_window", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the sliding window is dropped (window_size_left >= max_seqlen_k), so rows attend to keys past it",
       "model", "mha_varlen_fwd clamps window_size_left >= max_seqlen_k to -1"},
      {"max_seqlen.covers", "k_split", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the split-KV decode kernel drops the keys past ceil(max_seqlen_k / kBlockN) blocks", "model",
       "max_seqlen_q == 1 with more query than key heads: the swapped decode path splits KV by max_seqlen_k"},
      {"max_seqlen.covers", "k_backward", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; dk and dv of the keys past ceil(max_seqlen_k / kBlockN) blocks are never written, and dq misses "
       "their contributions",
       "model", "the backward's key-block grid comes from max_seqlen_k"},
      {"max_seqlen.single_query", "", "", "", "", false, O::raises, P::forward, M::attention,
       "RuntimeError: shape '[...]' is invalid for input of size ...", "report Dao-AILab/flash-attention#1537",
       "the swapped single-query path reshapes q by the segment count"},
      {"max_seqlen.single_query", "silent", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the swapped single-query path assigns tokens to the wrong sequences", "model",
       "the reshape succeeds with tokens in the wrong segments"},
      {"cu_seqlens.segments", "warning", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the segments differ from the intended sequences only where no intended output depends on it",
       "model", "segments over padding only, or splits the attention mask hides"},
      {"cu_seqlens.segments", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the segments cut across the intended sequences (cross-contamination or truncated context)",
       "golden packed-row-with-all-ones-mask", "segments that differ from the intended sequences"},
      {"cu_seqlens.grid", "", "", "", "", false, O::raises, P::forward, M::attention,
       "RuntimeError: CUDA error: invalid argument (the launch's grid exceeds 65535 blocks on y)",
       "report hiyouga/LlamaFactory#10452", "more segments than a grid dimension holds"},
      {"indices.range", "", "", "", "", false, O::device_assert, P::forward, M::gather, kAssert,
       "report Dao-AILab/flash-attention#1156", "a gather index past its view"},
      {"indices.range", "async", "", "", "", false, O::device_assert, P::forward, M::attention, kAssert,
       "report Dao-AILab/flash-attention#1156",
       "a gather index past its view, and nothing synchronises before flash-attn's host checks (max_seqlen host "
       "ints): the assert is reported after them, so a failing host check raises first (the order of "
       "Dao-AILab/flash-attention#1857)"},

      // ---- rotary -----------------------------------------------------------------------------
      {"rotary.dim", "fla", "fla", "0.6.0", "", false, O::raises, P::forward, M::rotary,
       "AssertionError: Rotary dimension must not exceed head dimension", "golden fla-0.6.0-rotary-dim-hidden-size",
       "fla-core 0.6.0 fla/modules/rotary/ops.py asserts R2 <= D before the launch"},
      {"rotary.dim", "fla", "fla", "", "0.6.0", false, O::wrong_output, P::forward, M::rotary,
       "no error; the kernel rotates past each head (into the next heads' columns), so every row but the first of "
       "each sequence comes back wrong",
       "golden fla-rotary-dim-hidden-size",
       "FLA before 0.6.0 rotates past each head and the tensor; measured on FLA 0.1 (H100): wrong rows, no error. "
       "fla-org/flash-linear-attention#180 reported an illegal memory access where the writes past the tensor "
       "left its allocation"},
      {"rotary.dim", "", "", "", "", false, O::raises, P::forward, M::rotary,
       "AssertionError: rotary_dim must be <= headdim", "model",
       "flash_attn's apply_rotary asserts it; transformers' broadcast fails"},
      {"rotary.even", "fla", "fla", "0.6.0", "", false, O::raises, P::forward, M::rotary,
       "AssertionError: Rotary dimension must be even", "model",
       "fla-core 0.6.0 RotaryEmbedding.__init__ asserts an even dim"},
      {"rotary.even", "kv_cache", "", "", "", false, O::raises, P::forward, M::rotary,
       "RuntimeError: Only rotary dimensions divisible by 16 are currently supported", "model",
       "flash_attn_with_kvcache's fused rotary (flash_api.cpp)"},
      {"rotary.even", "", "", "", "", false, O::wrong_output, P::forward, M::rotary,
       "no error; the kernel rotates one column past the rotary part", "model", "an odd rotary dim"},
      {"rotary.layout", "", "", "", "", false, O::raises, P::forward, M::rotary,
       "ValueError: the rotary kernel cannot unpack the tensor's shape", "model", "a tensor of the wrong rank"},
      {"rotary.layout", "fault", "", "", "", false, O::illegal_address, P::forward, M::rotary, kIllegal, "model",
       "FLA's varlen rotary with a batch dimension above 1"},
      {"rotary.layout", "strides", "", "", "", false, O::wrong_output, P::forward, M::rotary,
       "no error; heads are rotated as positions", "model", "a (B, H, T, D) tensor"},
      // rotary.table (checks_rotary.cpp): FLA's host asserts per release (fla/modules/rotary.py
      // up to 0.5.2: TR >= T always; fla-core 0.6.0 fla/modules/rotary/ops.py: TR >= T without
      // cu_seqlens, then seqlen_offsets + T <= TR for an int offset, and a device-side assert
      // for tensor offsets).
      {"rotary.table", "fla_tr_ge_t", "fla", "", "", false, O::raises, P::forward, M::rotary,
       "AssertionError: TR must be >= T", "report fla-org/flash-linear-attention#515",
       "FLA checks the table against the tensor's T (the packed length in varlen before 0.6.0)"},
      {"rotary.table", "fla_offset", "fla", "", "", false, O::raises, P::forward, M::rotary,
       "AssertionError", "model",
       "a bare `assert seqlen_offsets + T <= TR` (fla/modules/rotary.py; fla-core 0.6.0 with cu_seqlens: T is the "
       "packed length)"},
      {"rotary.table", "fla_tensor_offsets", "fla", "0.6.0", "", false, O::device_assert, P::forward, M::rotary,
       kAssert, "model", "fla-core 0.6.0 checks per-sequence offsets with torch._assert_async"},
      {"rotary.table", "fla_tensor_offsets", "fla", "", "0.6.0", false, O::wrong_output, P::forward, M::rotary,
       "no error; positions past the table are masked and left unrotated", "model",
       "FLA before 0.6.0 masks o_cs >= TR"},
      {"rotary.table", "flash_attn", "", "", "", false, O::raises, P::forward, M::rotary,
       "AssertionError: seqlen_ro must be >= seqlen", "model", "flash_attn's apply_rotary"},
      {"rotary.table", "flash_attn_offsets", "", "", "", false, O::wrong_output, P::forward, M::rotary,
       "no error; positions past the table are left unrotated", "model",
       "flash_attn's rotary with per-sequence offsets past the table"},
      {"rotary.table", "hf", "", "", "", false, O::device_assert, P::forward, M::rotary, kAssert, "model",
       "cos/sin indexed by a position id past the table"},
      {"rotary.positions", "", "", "", "", false, O::wrong_output, P::forward, M::rotary,
       "no error; every packed sequence but the first is rotated as if it continued the previous one", "model",
       "positions that do not restart per packed sequence"},

      // ---- dynamic (observed by the backends) -----------------------------------------------
      {"unpad.gather", "", "", "", "", false, O::device_assert, P::forward, M::gather, kAssert,
       "report Dao-AILab/flash-attention#1156", "an unpad gather index out of range"},
      {"unpad.gather", "async", "", "", "", false, O::device_assert, P::forward, M::attention, kAssert,
       "report Dao-AILab/flash-attention#1156",
       "an unpad gather index out of range whose assert is reported after flash-attn's host checks (nothing "
       "synchronises in between: the order of Dao-AILab/flash-attention#1857)"},
      {"rotary.access", "table", "", "", "", false, O::wrong_output, P::forward, M::rotary,
       "no error; positions before the cos/sin table read memory in front of it: those rows are rotated by garbage",
       "model", "the rotary kernel reads the table at a negative position"},
      {"rotary.access", "head", "", "", "", false, O::wrong_output, P::forward, M::rotary,
       "no error; each head's rotation writes into the neighbouring heads", "model",
       "rotary accesses inside the tensor but outside their head"},
      {"rotary.access", "tensor", "", "", "", false, O::out_of_bounds, P::forward, M::rotary,
       "no error; the rotary kernel reads and writes past the tensor (memory corruption possible)", "model",
       "rotary accesses past the tensor's end only"},
      {"attention.access", "", "", "", "", false, O::out_of_bounds, P::forward, M::attention,
       "no error; the attention kernel reads or writes rows past its tensors (memory corruption possible)", "model",
       "an access past the tensors the static checks did not explain"},
      {"attention.coverage", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; output rows are never written (torch.empty: stale values) or written by the wrong segment",
       "model", "output rows the kernel leaves unwritten or writes twice"},
      {"attention.coverage", "padding", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the output rows never written are padding, outside every intended sequence",
       "golden oracle-cu-short-of-rows-padding-training", "only padding rows past cu_seqlens_q[-1] are never written"},
      {"pad.scatter", "", "", "", "", false, O::device_assert, P::forward, M::attention, kAssert, "model",
       "pad_input's scatter index out of range"},
      {"result.reference", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; output rows differ from attention over the intended sequences", "model",
       "the checked execution's output against the fp64 reference"},

      // ---- dynamic, training only: the backward (cpu_backward.cpp, contract/fa2_backward.hpp) ----
      {"backward.access", "", "", "", "", true, O::out_of_bounds, P::backward, M::backward,
       "no error; the backward reads or writes rows past its tensors (memory corruption possible; reaching past "
       "the allocator's segment faults, as in Dao-AILab/flash-attention#1311)",
       "model", "an access of the backward past the tensors the static checks did not explain"},
      {"backward.coverage", "", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; gradient rows the backward never writes come back as torch.empty's contents (NaN gradients reported)",
       "report Dao-AILab/flash-attention#1661", "dq/dk/dv rows outside every segment the backward's grids cover"},
      {"backward.dq_offset", "", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; dq is wrong for the segments that start past the 32-bit dq_accum offset", "model",
       "dq_accum offsets wrap at 2^31 (block_info.h q_offset with int strides; fixed by "
       "Dao-AILab/flash-attention#2260 after 2.8.3)"},
      {"backward.reference", "", "", "", "", true, O::wrong_gradient, P::backward, M::backward,
       "no error; gradient rows differ from the gradients of attention over the intended sequences", "model",
       "the checked backward's gradients against the fp64 gradient reference"},

      // ---- launch -------------------------------------------------------------------------------
      {"launch.autotune_keys", "", "", "", "", false, O::raises, P::forward, M::attention,
       "IndexError: list index out of range", "report fla-org/flash-linear-attention#354",
       "Triton <= 3.1's positional key lookup runs past the end"},
      {"launch.autotune_keys", "warning", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the autotune cache key holds another parameter's value (configs reused across shapes)", "model",
       "a wrong or missing cache-key entry"},
      {"launch.fla_grid", "", "", "", "", false, O::raises, P::forward, M::attention,
       "RuntimeError: Triton Error [CUDA]: invalid argument", "report fla-org/flash-linear-attention#903",
       "token_shift's long kernel puts more than 65535 time chunks on grid axis y (FLA 0.3.1 - 0.5.0)"},
      {"launch.fla_grid", "one_kernel", "", "", "", false, O::raises, P::forward, M::attention,
       "RuntimeError: Triton Error [CUDA]: invalid argument", "model",
       "token_shift's (N, T) grid puts more than 65535 tokens of one document on grid axis y (FLA 0.2.2 - 0.3.0)"},

      // ---- Transformer Engine DotProductAttention, qkv_format "thd" (checks_te_thd.cpp) ---------
      {"te.thd_arguments", "", "", "", "", false, O::raises, P::forward, M::attention,
       "AssertionError: Attention mask type must be padding or padding_causal for qkv_format=thd!", "model",
       "TE's host checks of a THD call (DotProductAttention.forward, attn_forward_func_with_cp; the check names the "
       "release's message)"},
      {"te.padded_offsets", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; sequences read from the wrong rows (NaN where they run into padding)",
       "report NVIDIA/TransformerEngine#1409", "padded offsets that do not hold the actual tokens"},
      {"te.padded_offsets", "overrun", "", "", "", false, O::out_of_bounds, P::forward, M::attention,
       "no error; the kernel reads and writes rows past the tensors", "model",
       "cu_seqlens_padded ending past the rows (x CP)"},
      {"te.pad_between_seqs", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the padding between sequences is attended as tokens", "model",
       "pad_between_seqs=False with padded offsets that differ (context_parallel.py cp_p2p_fwd_prepare_qkv)"},
      {"te.pad_between_seqs", "tail", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; real keys dropped and real query rows left zero at the chunk boundaries of the unaligned sequences",
       "report NVIDIA/TransformerEngine#3331",
       "THD + CP (p2p) with pad_between_seqs False and an actual length not a multiple of 2 x CP (TE <= 2.17.1)"},
      {"te.cp_padding_multiple", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the last tokens of the unaligned sequences are dropped or read twice",
       "report NVIDIA/TransformerEngine#1930",
       "a padded length not a multiple of 2 x CP (measured with a two-GPU ring of FA2 calls: 23 of 3900 tokens "
       "wrong, bench/results/te-thd-cp2-h100-2026-11-27)"},
      {"te.cp_shard", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the ring's segments do not match the rank's rows", "model",
       "a rank's rows not the padded total / CP (measured with a two-GPU ring of FA2 calls: 3775 of 3900 tokens "
       "wrong, bench/results/te-thd-cp2-h100-2026-11-27)"},
      {"te.cp_shard", "max_seqlen", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the kernel's max_seqlen (max_seqlen_q / CP) is shorter than a rank's sequences", "model",
       "a local max_seqlen passed where TE takes the global one"},
      {"te.cp_chunks", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; chunks missing and held twice across the ranks", "model",
       "a contiguous split instead of the load-balanced one (measured with a two-GPU ring of FA2 calls: 2923 of 3900 "
       "tokens wrong, bench/results/te-thd-cp2-h100-2026-11-27)"},
      {"te.sequences", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; real queries attend to padding, or to another sequence, or lose part of their own", "model",
       "TE sequences (actual lengths from the padded offsets) that are not the intended ones"},
      {"te.sequences", "warning", "", "", "", false, O::ok, P::forward, M::attention,
       "no error; the real rows are right, the padding rows after each sequence attend to it", "model",
       "causal sequences that end in their padding (the padded offsets passed as the actual lengths)"},
      {"te.cp_group", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the ranks that disagree compute attention over the wrong tokens", "model",
       "ranks of one call that disagree on the global batch or the shards"},
      {"route.cu_seqlens_ignored", "", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; tokens attend across the cu_seqlens segments (valid tokens to padding)",
       "report Tencent-Hunyuan/HunyuanVideo#310",
       "an attention mode that does not pass cu_seqlens to a kernel"},
      {"route.cu_seqlens_ignored", "axolotl_batch", "", "", "", false, O::wrong_output, P::forward, M::attention,
       "no error; the packed row's documents attend to one another: the step's loss is higher than at context "
       "parallel size 1 or with varlen_llama3 (1.84x and 1.83x at step 0 on a 5-document pack in the thread; "
       "a one-document row bitwise identical)",
       "report axolotl-ai-cloud/axolotl#3608",
       "axolotl's batch ring adapter (ring_attn_func batch_*) on a row that holds several documents"},
  };
  return t;
}

const std::optional<Version>* release_of(const SymptomContext& c, std::string_view library) {
  if (library == "flash_attn") return &c.flash_attn;
  if (library == "fla") return &c.fla;
  if (library == "transformers") return &c.transformers;
  return nullptr;
}

// [from, to) of the library's releases; an unknown release is the newest (open-ended rows).
bool release_matches(const SymptomRow& row, const SymptomContext& c) {
  const std::optional<Version>* v = release_of(c, row.library);
  if (!v) return true;
  if (!*v) return row.to.empty();
  if (!row.from.empty() && **v < version_literal(row.from)) return false;
  if (!row.to.empty() && !(**v < version_literal(row.to))) return false;
  return true;
}

}  // namespace

std::span<const SymptomRow> symptom_table() { return table(); }

std::optional<Symptom> symptom_for(std::string_view invariant, std::string_view variant, const SymptomContext& context,
                                   std::string message, std::vector<RowRange> rows) {
  // The forward row (the check's message and rows describe it) and, for a training step, the
  // backward row; the call's own combination rule picks what happens first.
  auto find = [&](bool training_rows) -> const SymptomRow* {
    for (const SymptomRow& row : table())
      if (row.invariant == invariant && row.variant == variant && row.training_only == training_rows &&
          release_matches(row, context))
        return &row;
    return nullptr;
  };
  auto make = [](const SymptomRow& row) {
    Symptom s;
    s.outcome = row.outcome;
    s.pass = row.pass;
    s.at = row.at;
    s.message = std::string(row.message);
    s.basis = std::string(row.basis);
    return s;
  };
  std::optional<Symptom> forward, backward;
  if (const SymptomRow* row = find(false)) {
    forward = make(*row);
    if (!message.empty()) forward->message = std::move(message);
    forward->rows = std::move(rows);
  }
  if (context.pass == CallPass::training)
    if (const SymptomRow* row = find(true)) {
      backward = make(*row);
      if (!forward) {  // a case only the backward has: the check's amounts describe it
        if (!message.empty()) backward->message = std::move(message);
        backward->rows = std::move(rows);
      }
    }
  if (!forward || !backward) return forward ? forward : backward;
  const Finding both[] = {{invariant, 0, &*forward}, {invariant, 1, &*backward}};
  const Prediction p = combine(both, CallPass::training);
  if (p.invariant.empty()) return forward;  // both ok
  return p.symptom;
}

}  // namespace ad
