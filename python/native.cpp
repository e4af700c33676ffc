// attn_doctor._native: the pipeline of `attn-doctor check` inside a Python process (nanobind).
//
// Two entry points, both over the same lib/ the binary runs:
//   check(...)        one batch (a file, or the text of one) -> (exit code, report text or JSON);
//                     what attn_doctor.check() and the capture's diagnosis use.
//   guard_check(...)  the in-process guard's per-call check: the same diagnosis with
//                     --backend none (replay + static checks), nothing returned for a call that
//                     holds every invariant (the common case); the report rendered only for a
//                     call that breaks one.
// The GIL is released while C++ runs. Invalid input raises InputError (a ValueError) with the
// file, the JSON path, what was expected and what was found, as the binary's exit 2 does.
// Paths are taken as the file system has them (str or bytes, os.fsencode: a name need not be
// UTF-8); every string handed back (reports, messages) is valid UTF-8, ill-formed bytes
// written as U+FFFD, so that no message or report turns into a UnicodeDecodeError.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/array.h>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/direct.hpp"
#include "render/render.hpp"
#include "util/xml.hpp"
#ifdef ATTN_DOCTOR_WITH_CUDA
#include <cuda_runtime_api.h>

#include "launch.hpp"
#include "ops_readout.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A path argument (str, bytes or os.PathLike) as the bytes the file system uses.
std::string fs_path(nb::handle path) {
  nb::object p = nb::steal(PyOS_FSPath(path.ptr()));
  if (!p.is_valid()) throw nb::python_error();
  if (!PyBytes_Check(p.ptr())) {
    p = nb::steal(PyUnicode_EncodeFSDefault(p.ptr()));
    if (!p.is_valid()) throw nb::python_error();
  }
  return std::string(PyBytes_AS_STRING(p.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(p.ptr())));
}

std::optional<ad::Version> version_argument(const std::string& text, const char* name) {
  if (text.empty()) return std::nullopt;
  auto v = ad::parse_version(text);
  if (!v) throw nb::value_error((std::string(name) + ": expected a version such as 4.44.0, found \"" + text + "\"").c_str());
  return v;
}

struct CheckRequest {
  std::string backend = "auto";
  std::string format = "json";
  std::string transformers, flash_attn;
  uint64_t seed = 0;
  int64_t budget = 0;
  bool full = false, strict = false, color = false;
};

// (exit code, rendered report) for one batch, as `attn-doctor check` computes them.
std::tuple<int, std::string> run_check(const ad::Batch& batch, const std::string& label, const CheckRequest& req) {
  ad::CheckOptions options;
  options.transformers = version_argument(req.transformers, "transformers");
  options.flash_attn = version_argument(req.flash_attn, "flash_attn");
  auto backend = ad::parse_backend_choice(req.backend);
  if (!backend) throw nb::value_error(("backend: expected auto, cpu, cuda or none, found \"" + req.backend + "\"").c_str());
  options.backend = *backend;
  options.exec.seed = req.seed;
  if (req.budget > 0) options.exec.budget = req.budget;
  options.exec.full = req.full;
  options.strict = req.strict;
  ad::Diagnosis diagnosis;
  {
    nb::gil_scoped_release release;
    diagnosis = ad::diagnose(batch, options, label);
  }
  ad::RenderOptions render{req.color && req.format == "text", req.full, false};
  std::string out = req.format == "text"
                        ? ad::valid_utf8(ad::render_text(diagnosis, render))
                        : ad::to_json(diagnosis, render).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return {ad::exit_code_for(diagnosis.report, req.strict), out};
}

CheckRequest request(std::string backend, std::string format, std::string transformers, std::string flash_attn,
                     uint64_t seed, int64_t budget, bool full, bool strict, bool color) {
  if (format != "json" && format != "text")
    throw nb::value_error(("format: expected json or text, found \"" + format + "\"").c_str());
  return CheckRequest{std::move(backend), std::move(format), std::move(transformers), std::move(flash_attn),
                      seed, budget, full, strict, color};
}

// What the guard needs to know about one call. `warnings`: (id, message) of each warning;
// `report`: the full JSON report, only when an error-severity invariant is violated.
using GuardResult = std::optional<std::tuple<int, std::vector<std::tuple<std::string, std::string>>, std::optional<std::string>>>;

// The verdict is `attn-doctor check --backend none`'s: the same diagnose() call decides it, and
// its report is what the guard raises with. A document the guard wrote without reading the
// call's index tensors (metadata_only: they live on the device and reading them would
// synchronise) is diagnosed with CheckOptions::index_values_unread.
// advisories: each advisory-table row the call matches (not a possible-only match) is one more
// warning entry, (its id, the release, symptom and fix in words): it never raises, in strict
// mode neither, and a call that matches one is not None.
GuardResult guard_check(const std::string& text, const std::string& origin, bool strict, bool metadata_only,
                        bool advisories) {
  ad::CheckOptions options;
  options.backend = ad::BackendChoice::none;
  options.strict = strict;
  options.index_values_unread = metadata_only;
  ad::Diagnosis diagnosis;
  {
    nb::gil_scoped_release release;
    diagnosis = ad::diagnose(ad::parse_batch_text(text, origin), options, origin);
  }
  const ad::Report& report = diagnosis.report;
  // a stage that could not run is the guard's own problem (logged, the call goes on), never a
  // silent pass
  if (report.stage_error) throw std::runtime_error(ad::valid_utf8(report.error_message));
  const bool advised = advisories && std::any_of(report.advisories.begin(), report.advisories.end(),
                                                 [](const ad::AdvisoryMatch& m) { return !m.possible; });
  if (report.violations.empty() && !advised) return std::nullopt;
  int errors = 0;
  std::vector<std::tuple<std::string, std::string>> warnings;
  for (const ad::Violation& v : report.violations) {
    if (v.severity == ad::Severity::error || strict) ++errors;
    else warnings.emplace_back(v.id, ad::valid_utf8(v.message));
  }
  if (advised)
    for (const ad::AdvisoryMatch& m : report.advisories) {
      if (m.possible) continue;
      const ad::Advisory& a = *m.advisory;
      warnings.emplace_back(std::string(a.id),
                            ad::valid_utf8(std::string(a.library) + " " + m.release + " has this bug for this call (" +
                                           std::string(a.reference) + "): " + std::string(a.symptom) + "; " + m.why +
                                           (a.fixed_in.empty() ? std::string("") : "; fixed in " + std::string(a.fixed_in))));
    }
  std::optional<std::string> json;
  if (errors > 0) json = ad::to_json(diagnosis, ad::RenderOptions{}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return std::make_tuple(errors, std::move(warnings), std::move(json));
}


// ---- attn_doctor.ops: one call on the caller's tensors ---------------------------------
// A tensor crosses as (data_ptr, rows, heads, dim, stride0, stride1, stride2), strides in
// elements; cu_seqlens as (data_ptr, entries) of int32. Python keeps the tensors alive for
// the call; the GIL is released while the twins run.
using TensorArg = std::array<int64_t, 7>;

ad::direct::TensorView view_of(const TensorArg& t) {
  ad::direct::TensorView v;
  v.data = reinterpret_cast<const void*>(static_cast<uintptr_t>(t[0]));
  v.rows = t[1], v.heads = t[2], v.dim = t[3];
  v.stride[0] = t[4], v.stride[1] = t[5], v.stride[2] = t[6];
  return v;
}

std::vector<int32_t> int32_values(int64_t ptr, int64_t n) {
  const int32_t* p = reinterpret_cast<const int32_t*>(static_cast<uintptr_t>(ptr));
  return n > 0 && p ? std::vector<int32_t>(p, p + n) : std::vector<int32_t>{};
}

ad::ElemType elem_of(int elem) {
  if (elem < 0 || elem > 2) throw nb::value_error("elem: expected 0 (bf16), 1 (fp16) or 2 (fp32)");
  return static_cast<ad::ElemType>(elem);
}

ad::direct::VarlenCall call_of(int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v,
                               const std::array<int64_t, 2>& cu_q, const std::array<int64_t, 2>& cu_k, int64_t max_q,
                               int64_t max_k, float scale, float softcap, bool causal, int64_t wl, int64_t wr) {
  ad::direct::VarlenCall c;
  c.elem = elem_of(elem);
  c.q = view_of(q), c.k = view_of(k), c.v = view_of(v);
  c.cu_seqlens_q = int32_values(cu_q[0], cu_q[1]);
  c.cu_seqlens_k = int32_values(cu_k[0], cu_k[1]);
  c.max_seqlen_q = max_q, c.max_seqlen_k = max_k;
  c.softmax_scale = scale, c.softcap = softcap, c.causal = causal;
  c.window_left = wl, c.window_right = wr;
  return c;
}

// seqused_k as (data pointer, entries) of an int32 CPU tensor, or None.
using SeqUsed = std::optional<std::array<int64_t, 2>>;
void set_seqused(ad::direct::VarlenCall& c, const SeqUsed& used) {
  if (used) c.seqused_k = int32_values((*used)[0], (*used)[1]);
}

// A record as Python sees it: None when nothing was refused.
nb::object record_dict(const ad::AccessRecord& r) {
  if (r.count == 0) return nb::none();
  nb::dict d;
  d["count"] = r.count;
  d["min_index"] = r.min_index;
  if (r.has_first()) {
    const ad::Access& a = r.first;
    d["buffer"] = ad::to_string(a.buffer);
    d["kind"] = ad::to_string(a.kind);
    d["unit"] = ad::to_string(a.unit);
    d["index"] = a.index;
    d["bound"] = a.bound;
    d["block"] = std::make_tuple(a.block[0], a.block[1], a.block[2]);
    d["segment"] = a.segment;
    d["row"] = a.row;
    d["head"] = a.head;
    d["region"] = ad::to_string(a.region);
  }
  return d;
}

const void* as_host(int64_t x) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(x)); }

// Rows of one output unwritten / written twice: the CPU twin's (direct::Coverage) and the ops
// readout's (ops::RowSummary) alike.
template <class RowCounts>
nb::dict coverage_dict(const RowCounts& c) {
  nb::dict d;
  d["unwritten"] = c.unwritten;
  d["first_unwritten"] = c.first_unwritten;
  d["overwritten"] = c.overwritten;
  d["first_overwritten"] = c.first_overwritten;
  return d;
}

#ifdef ATTN_DOCTOR_WITH_CUDA
// ---- the checked CUDA kernels on the caller's device buffers -----------------------------
// Operands contiguous (rows, heads, dim) on one device; cu_seqlens int32 on the device (their
// values are never read here); `record`: device memory holding an empty AccessRecord, which
// the checked launches fill; `stream`: the caller's current stream. Launches only: nothing
// here synchronises (the launch's own configuration error is read with cudaGetLastError,
// which does not wait).
void* as_ptr(int64_t x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); }

void set_cuda_call(ad::kern::VarlenParamsBase& p, int elem, const TensorArg& q, const TensorArg& k,
                   const TensorArg& v, int64_t cu_q, int64_t cu_k, int32_t batch, int64_t max_q, int64_t max_k,
                   float scale, float softcap, bool causal, int64_t wl, int64_t wr) {
  for (const TensorArg* t : {&q, &k, &v})
    if ((*t)[6] != 1 || (*t)[5] != (*t)[3] || (*t)[4] != (*t)[2] * (*t)[3])
      throw nb::value_error("the checked CUDA kernels take contiguous (rows, heads, dim) operands");
  ad::kern::set_varlen_call(
      p, elem_of(elem), {as_ptr(q[0]), q[1], static_cast<int32_t>(q[2])},
      {as_ptr(k[0]), k[1], static_cast<int32_t>(k[2])}, {as_ptr(v[0]), v[1], static_cast<int32_t>(v[2])},
      {static_cast<const int32_t*>(as_ptr(cu_q)), int64_t(batch) + 1},
      {static_cast<const int32_t*>(as_ptr(cu_k)), int64_t(batch) + 1},
      {batch, static_cast<int32_t>(q[2]), static_cast<int32_t>(k[2]), static_cast<int32_t>(q[3]),
       static_cast<int32_t>(max_q), static_cast<int32_t>(max_k)},
      {scale, softcap, causal, static_cast<int32_t>(wl), static_cast<int32_t>(wr)});
  p.lse_size = q[1] * q[2];
}

// The backward's fp32 workspaces (softmax_d, dq_accum) for a call of these sizes, as the
// launches take them (kern::varlen_bwd_workspace; heads: the query's).
ad::kern::BwdWorkspace bwd_workspace(int64_t rows_q, int32_t heads, int32_t head_dim, int32_t batch, int64_t max_q,
                                     int64_t max_k) {
  ad::kern::VarlenBwdParams p;
  p.q.rows = rows_q;
  p.num_heads = heads, p.num_heads_k = heads, p.head_dim = head_dim;
  p.batch = batch;
  p.max_seqlen_q = static_cast<int32_t>(max_q), p.max_seqlen_k = static_cast<int32_t>(max_k);
  return ad::kern::varlen_bwd_workspace(p);
}

// attn_doctor.ops' one fp32 workspace: softmax_d, then dq_accum at the next multiple of 64
// elements.
int64_t ops_dq_accum_at(const ad::kern::BwdWorkspace& w) { return (w.softmax_d + 63) / 64 * 64; }

// The backward's tensors: out, dout and dq take q's rows and heads; dk and dv k's rows, or
// with fewer key/value heads (GQA) the expanded per-query-head gradients the launches write,
// summed into dk and dv.
void set_bwd_tensors(ad::kern::VarlenBwdParams& p, const TensorArg& q, const TensorArg& k, int64_t out, int64_t dout,
                     int64_t lse, int64_t dq, int64_t dk, int64_t dv, int64_t dk_expanded, int64_t dv_expanded) {
  const int64_t rows_q = q[1], rows_k = k[1];
  const int32_t heads = static_cast<int32_t>(q[2]), heads_k = static_cast<int32_t>(k[2]);
  const bool gqa = heads != heads_k;
  p.out = {as_ptr(out), rows_q, heads};
  p.lse = static_cast<const float*>(as_ptr(lse));
  p.dout = {as_ptr(dout), rows_q, heads};
  p.dq = {as_ptr(dq), rows_q, heads};
  p.dk = {as_ptr(gqa ? dk_expanded : dk), rows_k, gqa ? heads : heads_k};
  p.dv = {as_ptr(gqa ? dv_expanded : dv), rows_k, gqa ? heads : heads_k};
  p.dk_out = gqa ? as_ptr(dk) : nullptr;
  p.dv_out = gqa ? as_ptr(dv) : nullptr;
}

void launched() {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA launch: ") + cudaGetErrorString(e));
}

// ---- attn_doctor.ops: the launches' readout, on the host side ----------------------------
// Per device a ring of kRing slots: the pinned, mapped host slots the readout kernel writes
// (python/ops_readout.hpp) and one device AccessRecord per slot, empty between launches (the
// readout kernel resets it). A launch takes a free slot; its entry waits in `pending` (in
// launch order) until the host reads it: drain() reads the entries whose slot landed, gives
// their slots back and hands the first broken one to Python (with the payload Python gave
// the launch: what the report needs). Launches captured in a CUDA graph keep their slot
// (`captured`): every replay rewrites it. Entries dropped unread (after a raise, or a reset)
// wait in `retired` until their slot lands, so that no late readout writes a reused slot.
// Everything here runs with the GIL held (the payloads are Python objects), except the
// stream synchronisation of a blocking read.
constexpr int kRing = 1024;

enum class Readout { poll, event };

struct Ring {
  int device = 0;
  ad::ops::Slot* host = nullptr;      // pinned, mapped
  ad::ops::Slot* host_dev = nullptr;  // its device address
  ad::AccessRecord* records = nullptr;
  std::vector<int> free;
  std::vector<cudaEvent_t> events;  // readout "event": one per slot, made on first use
};

struct Entry {
  Ring* ring = nullptr;
  int slot = 0;
  bool backward = false;
  bool counted[2] = {false, false};
  Readout mode = Readout::poll;
  cudaStream_t stream = nullptr;
  nb::object payload;
};

struct OpsState {
  std::map<int, std::unique_ptr<Ring>> rings;
  std::deque<Entry> pending;
  std::vector<Entry> captured;
  std::vector<Entry> retired;
  Readout readout = Readout::poll;
};

// Never destroyed: at interpreter exit no CUDA call and no Python object release runs here.
OpsState& ops_state() {
  static OpsState* s = new OpsState;
  return *s;
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("attn_doctor.ops: ") + what + ": " + cudaGetErrorString(e));
}

int32_t slot_state(const Ring& r, int slot) {
  return *reinterpret_cast<const volatile int32_t*>(&r.host[slot].state);
}

// Whether the entry's readout landed (never waits).
bool landed(const Entry& e) {
  if (e.mode == Readout::event) {
    const cudaError_t q = cudaEventQuery(e.ring->events[static_cast<size_t>(e.slot)]);
    if (q == cudaErrorNotReady) return false;
    cuda_ok(q, "reading a launch's event");
    return true;
  }
  if (slot_state(*e.ring, e.slot) == ad::ops::kSlotPending) return false;
  std::atomic_thread_fence(std::memory_order_acquire);  // the slot's contents are read after its state
  return true;
}

void sweep_retired(OpsState& s) {
  auto& r = s.retired;
  for (size_t i = 0; i < r.size();) {
    if (landed(r[i])) {
      r[i].ring->free.push_back(r[i].slot);
      r[i] = std::move(r.back());
      r.pop_back();
    } else {
      ++i;
    }
  }
}

Ring& ring_for(OpsState& s, int device, bool capturing) {
  auto it = s.rings.find(device);
  if (it != s.rings.end()) return *it->second;
  if (capturing)
    throw std::runtime_error("attn_doctor.ops: the first checked call on a device allocates its readout ring and "
                             "cannot run inside a CUDA graph capture: make one call on the device before capturing");
  int previous = 0;
  cuda_ok(cudaGetDevice(&previous), "cudaGetDevice");
  cuda_ok(cudaSetDevice(device), "cudaSetDevice");
  auto ring = std::make_unique<Ring>();
  ring->device = device;
  void* host = nullptr;
  cudaError_t e = cudaHostAlloc(&host, sizeof(ad::ops::Slot) * kRing, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) {
    ring->host = static_cast<ad::ops::Slot*>(host);
    for (int i = 0; i < kRing; ++i) new (ring->host + i) ad::ops::Slot();
    e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&ring->host_dev), host, 0);
  }
  if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(&ring->records), sizeof(ad::AccessRecord) * kRing);
  if (e == cudaSuccess) {
    const std::vector<ad::AccessRecord> empty(kRing);
    e = cudaMemcpy(ring->records, empty.data(), sizeof(ad::AccessRecord) * kRing, cudaMemcpyHostToDevice);
  }
  const cudaError_t restored = cudaSetDevice(previous);
  if (e != cudaSuccess) {
    // the allocation's error is the one reported; what freeing after it returns adds nothing
    if (ring->records) static_cast<void>(cudaFree(ring->records));
    if (host) static_cast<void>(cudaFreeHost(host));
    cuda_ok(e, "allocating the readout ring");
  }
  cuda_ok(restored, "cudaSetDevice (restoring the current device)");
  ring->events.assign(kRing, nullptr);
  ring->free.reserve(kRing);
  for (int i = kRing - 1; i >= 0; --i) ring->free.push_back(i);
  return *(s.rings[device] = std::move(ring));
}

int take_slot(OpsState& s, Ring& r) {
  if (r.free.empty()) sweep_retired(s);
  if (r.free.empty())
    throw std::runtime_error("attn_doctor.ops: more than " + std::to_string(kRing) +
                             " launches with unread violation records; call attn_doctor.ops.check() after a "
                             "synchronisation");
  const int slot = r.free.back();
  r.free.pop_back();
  return slot;
}

// A checked launch about to be enqueued on `stream`: its slot, reset to pending, and its
// record. `finish` enqueues the readout after the launch and files the entry.
struct Launch {
  OpsState& s;
  bool capturing;
  Ring& ring;
  int slot;
  cudaStream_t stream;
  bool filed = false;

  Launch(OpsState& state, int device, cudaStream_t st)
      : s(state), capturing(is_capturing(st)), ring(ring_for(state, device, capturing)), slot(take_slot(state, ring)),
        stream(st) {
    *reinterpret_cast<volatile int32_t*>(&ring.host[slot].state) = ad::ops::kSlotPending;
  }
  ~Launch() {
    if (!filed) ring.free.push_back(slot);  // the launch failed before its readout was enqueued
  }
  static bool is_capturing(cudaStream_t st) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cuda_ok(cudaStreamIsCapturing(st, &status), "cudaStreamIsCapturing");
    return status != cudaStreamCaptureStatusNone;
  }
  ad::AccessRecord* record() const { return ring.records + slot; }

  void finish(bool backward, uint32_t* c0, int64_t n0, uint32_t* c1, int64_t n1, nb::object payload) {
    static const ad::AccessRecord empty;
    cuda_ok(ad::ops::launch_readout(record(), c0, n0, c1, n1, ring.host_dev + slot, empty, stream),
            "launching the readout");
    Entry e;
    e.ring = &ring, e.slot = slot, e.backward = backward, e.stream = stream;
    e.counted[0] = c0 != nullptr, e.counted[1] = c1 != nullptr;
    e.mode = capturing ? Readout::poll : s.readout;
    e.payload = std::move(payload);
    if (e.mode == Readout::event) {
      cudaEvent_t& ev = ring.events[static_cast<size_t>(slot)];
      if (!ev) cuda_ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
      cuda_ok(cudaEventRecord(ev, stream), "cudaEventRecord");
    }
    filed = true;
    if (capturing) s.captured.push_back(std::move(e));
    else s.pending.push_back(std::move(e));
  }
};

// Zeroes the row counters of a launch on its stream (uint32, `rows` of them).
void zero_counters(uint32_t* counters, int64_t rows, cudaStream_t stream) {
  if (counters && rows > 0)
    cuda_ok(cudaMemsetAsync(counters, 0, sizeof(uint32_t) * static_cast<size_t>(rows), stream), "zeroing the row counters");
}

bool broken(const Entry& e) {
  const ad::ops::Slot& slot = e.ring->host[e.slot];
  if (slot.access.count != 0) return true;
  for (int i = 0; i < 2; ++i)
    if (e.counted[i] && (slot.rows[i].unwritten != 0 || slot.rows[i].overwritten != 0)) return true;
  return false;
}

// The result as ops._finding reads it: {access, rows} (forward) or {access, dq_rows, dkv_rows};
// a counter set that was not counted is an empty dict.
nb::dict result_dict(const Entry& e) {
  const ad::ops::Slot& slot = e.ring->host[e.slot];
  nb::dict d;
  d["access"] = record_dict(slot.access);
  const char* keys[2] = {e.backward ? "dq_rows" : "rows", "dkv_rows"};
  for (int i = 0; i < (e.backward ? 2 : 1); ++i) d[keys[i]] = e.counted[i] ? nb::object(coverage_dict(slot.rows[i])) : nb::object(nb::dict());
  return d;
}

// Reads the pending entries in launch order: None when every one read was clean (or the next
// one has not landed and `block` is false), else (payload, result) of the first broken one;
// the entries after it are dropped (retired). `block`: wait for the entries' streams.
nb::object ops_drain(bool block) {
  OpsState& s = ops_state();
  while (!s.pending.empty()) {
    Entry& e = s.pending.front();
    if (!landed(e)) {
      if (!block) return nb::none();
      const cudaStream_t stream = e.stream;
      cudaError_t err;
      {
        nb::gil_scoped_release release;
        err = cudaStreamSynchronize(stream);
      }
      cuda_ok(err, "waiting for a checked launch");
      continue;  // the front is read again (another thread may have read it meanwhile)
    }
    Entry done = std::move(e);
    s.pending.pop_front();
    done.ring->free.push_back(done.slot);
    if (!broken(done)) continue;
    nb::object out = nb::make_tuple(done.payload, result_dict(done));
    for (Entry& rest : s.pending) s.retired.push_back(std::move(rest));
    s.pending.clear();
    sweep_retired(s);
    return out;
  }
  sweep_retired(s);
  return nb::none();
}

// (payload, result) of every captured launch whose last replay was broken (the slot of a
// graph not replayed since its capture reads as clean).
nb::list ops_captured() {
  nb::list out;
  for (const Entry& e : ops_state().captured)
    if (landed(e) && broken(e))
      out.append(nb::make_tuple(e.payload, result_dict(e)));
  return out;
}
#endif

// An exception translator that raises the Python exception `payload` with E's message as
// valid UTF-8.
template <class E>
void translate_as_utf8(const std::exception_ptr& p, void* payload) {
  try {
    std::rethrow_exception(p);
  } catch (const E& e) {
    PyErr_SetString(static_cast<PyObject*>(payload), ad::valid_utf8(e.what()).c_str());
  }
}
}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "attn-doctor's checks in-process (the library behind the attn-doctor binary)";
  m.attr("__version__") = ad::kToolVersion;
#ifdef ATTN_DOCTOR_WITH_CUDA
  m.attr("cuda_backend_built") = true;
#else
  m.attr("cuda_backend_built") = false;
#endif
  nb::exception<ad::InputError> input_error(m, "InputError", PyExc_ValueError);
  nb::exception<ad::CapabilityError> capability_error(m, "CapabilityError", PyExc_RuntimeError);
  // Tried before the two translators above (the last registered comes first): the message as
  // valid UTF-8, since it may quote a file's bytes or name (PyErr_SetString would fail on
  // them and raise UnicodeDecodeError instead).
  nb::register_exception_translator(translate_as_utf8<ad::InputError>, input_error.ptr());
  nb::register_exception_translator(translate_as_utf8<ad::CapabilityError>, capability_error.ptr());

  m.def(
      "check_file",
      [](nb::handle path_arg, std::string backend, std::string format, std::string transformers,
         std::string flash_attn, uint64_t seed, int64_t budget, bool full, bool strict, bool color) {
        auto req = request(std::move(backend), std::move(format), std::move(transformers), std::move(flash_attn), seed,
                           budget, full, strict, color);
        const std::string path = fs_path(path_arg);
        ad::Batch batch;
        {
          nb::gil_scoped_release release;
          batch = ad::load_batch_file(path);
        }
        return run_check(batch, path, req);
      },
      "path"_a, "backend"_a = "auto", "format"_a = "json", "transformers"_a = "", "flash_attn"_a = "", "seed"_a = 0,
      "budget"_a = 0, "full"_a = false, "strict"_a = false, "color"_a = false,
      "(exit code, report) of `attn-doctor check PATH` (str, bytes or os.PathLike): the report as JSON text or the "
      "text rendering");
  m.def(
      "check_text",
      [](const std::string& text, nb::handle origin_arg, std::string backend, std::string format,
         std::string transformers, std::string flash_attn, uint64_t seed, int64_t budget, bool full, bool strict,
         bool color) {
        auto req = request(std::move(backend), std::move(format), std::move(transformers), std::move(flash_attn), seed,
                           budget, full, strict, color);
        const std::string origin = fs_path(origin_arg);
        ad::Batch batch;
        {
          nb::gil_scoped_release release;
          batch = ad::parse_batch_text(text, origin);
        }
        return run_check(batch, origin, req);
      },
      "text"_a, "origin"_a, "backend"_a = "auto", "format"_a = "json", "transformers"_a = "", "flash_attn"_a = "",
      "seed"_a = 0, "budget"_a = 0, "full"_a = false, "strict"_a = false, "color"_a = false,
      "as check_file, for the JSON text of a batch; `origin` names it in messages and anchors relative .npy paths");
  m.def("guard_check", &guard_check, "text"_a, "origin"_a, "strict"_a = false, "metadata_only"_a = false,
        "advisories"_a = false,
        "None when the call holds every static invariant, else (errors, [(id, message) of warnings], report JSON "
        "or None when there is no error); metadata_only: the document was written without the index tensors' "
        "values, keep the invariants that need none; advisories: an advisory-table row the call matches is a "
        "warning entry too (its id), never an error");
  m.def(
      "varlen_host_refusal",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, const std::array<int64_t, 2>& cu_q,
         const std::array<int64_t, 2>& cu_k, int64_t max_q, int64_t max_k) {
        // only metadata is read here: cu_seqlens' sizes, never their values
        ad::direct::VarlenCall c = call_of(elem, q, k, v, {0, 0}, {0, 0}, max_q, max_k, 1.f, 0.f, false, -1, -1);
        c.cu_seqlens_q.assign(static_cast<size_t>(std::max<int64_t>(cu_q[1], 0)), 0);
        c.cu_seqlens_k.assign(static_cast<size_t>(std::max<int64_t>(cu_k[1], 0)), 0);
        return ad::direct::host_refusal(c);
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "max_seqlen_q"_a, "max_seqlen_k"_a,
      "what the release would refuse on the host for a call of this shape (\"\" when nothing)");
  m.def(
      "varlen_fwd_cpu",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, const std::array<int64_t, 2>& cu_q,
         const std::array<int64_t, 2>& cu_k, int64_t max_q, int64_t max_k, float scale, float softcap, bool causal,
         int64_t wl, int64_t wr, int64_t out, int64_t lse, int threads, const SeqUsed& seqused_k) {
        ad::direct::VarlenCall c = call_of(elem, q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, causal, wl, wr);
        set_seqused(c, seqused_k);
        const std::string refused = ad::direct::host_refusal(c);
        if (!refused.empty()) throw nb::value_error(refused.c_str());
        ad::direct::ForwardResult r;
        {
          nb::gil_scoped_release release;
          r = ad::direct::varlen_forward(c, reinterpret_cast<void*>(static_cast<uintptr_t>(out)),
                                         reinterpret_cast<float*>(static_cast<uintptr_t>(lse)), threads);
        }
        nb::dict d;
        d["access"] = record_dict(r.access);
        d["rows"] = coverage_dict(r.rows);
        return d;
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "max_seqlen_q"_a, "max_seqlen_k"_a, "scale"_a,
      "softcap"_a, "causal"_a, "window_left"_a, "window_right"_a, "out"_a, "lse"_a, "threads"_a = 1,
      "seqused_k"_a = nb::none(),
      "the checked varlen forward on CPU buffers (the CPU twin): writes out and lse, returns {access: refused "
      "accesses or None, rows: output rows unwritten / written twice}; seqused_k: (pointer, entries) of int32");
  m.def(
      "varlen_bwd_cpu",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, const TensorArg& out,
         const TensorArg& dout, int64_t lse, const std::array<int64_t, 2>& cu_q, const std::array<int64_t, 2>& cu_k,
         int64_t max_q, int64_t max_k, float scale, float softcap, bool causal, int64_t wl, int64_t wr, int64_t dq,
         int64_t dk, int64_t dv, int threads, const SeqUsed& seqused_k) {
        ad::direct::VarlenCall c = call_of(elem, q, k, v, cu_q, cu_k, max_q, max_k, scale, softcap, causal, wl, wr);
        set_seqused(c, seqused_k);
        const std::string refused = ad::direct::host_refusal(c);
        if (!refused.empty()) throw nb::value_error(refused.c_str());
        auto ptr = [](int64_t x) { return reinterpret_cast<void*>(static_cast<uintptr_t>(x)); };
        ad::direct::BackwardResult r;
        {
          nb::gil_scoped_release release;
          r = ad::direct::varlen_backward(c, view_of(out), view_of(dout),
                                          reinterpret_cast<const float*>(static_cast<uintptr_t>(lse)), ptr(dq), ptr(dk),
                                          ptr(dv), threads);
        }
        ad::AccessRecord all = r.dot_do_o;
        all.merge(r.dq_dk_dv);
        all.merge(r.convert_dq);
        nb::dict d;
        d["access"] = record_dict(all);
        d["launches"] = nb::make_tuple(record_dict(r.dot_do_o), record_dict(r.dq_dk_dv), record_dict(r.convert_dq));
        d["dq_rows"] = coverage_dict(r.dq_rows);
        d["dkv_rows"] = coverage_dict(r.dkv_rows);
        return d;
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "out"_a, "dout"_a, "lse"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "max_seqlen_q"_a,
      "max_seqlen_k"_a, "scale"_a, "softcap"_a, "causal"_a, "window_left"_a, "window_right"_a, "dq"_a, "dk"_a, "dv"_a,
      "threads"_a = 1, "seqused_k"_a = nb::none(),
      "the checked varlen backward on CPU buffers (the CPU twin's three launches and the group sum): writes dq, dk, "
      "dv, returns the refused accesses (all, and per launch; the launch check's keys left out in dot_do_o's) and the "
      "rows no launch wrote; seqused_k: the forward's, (pointer, entries) of int32");
  m.def(
      "rotary_cpu",
      [](int elem, int contract, const TensorArg& x, int64_t out, int64_t half, bool interleaved, bool inplace,
         int64_t cos, int64_t sin, int64_t table_rows, bool varlen, const std::array<int64_t, 2>& cu,
         int64_t max_seqlen, int64_t seqlen, bool per_sequence, const std::vector<int64_t>& offsets, int fa_minor,
         bool conjugate, int threads) {
        if (contract < 0 || contract > 1) throw nb::value_error("contract: expected 0 (flash_attn) or 1 (fla)");
        if (half < 0 || table_rows < 0) throw nb::value_error("half and table_rows must be >= 0");
        ad::direct::RotaryCall c;
        c.elem = elem_of(elem);
        c.contract = static_cast<ad::RotaryContract>(contract);
        c.x = view_of(x);
        c.half = half, c.interleaved = interleaved, c.inplace = inplace;
        const float* cp = static_cast<const float*>(as_host(cos));
        const float* sp = static_cast<const float*>(as_host(sin));
        c.cos.assign(cp, cp + table_rows * half);
        c.sin.assign(sp, sp + table_rows * half);
        c.table_rows = table_rows;
        c.varlen = varlen;
        if (varlen) c.cu_seqlens = int32_values(cu[0], cu[1]);
        c.max_seqlen = max_seqlen, c.seqlen = seqlen;
        c.per_sequence = per_sequence, c.offsets = offsets;
        c.fa_minor = fa_minor, c.conjugate = conjugate;
        ad::direct::RotaryResult r;
        {
          nb::gil_scoped_release release;
          r = ad::direct::rotary(c, reinterpret_cast<void*>(static_cast<uintptr_t>(out)), threads);
        }
        nb::dict d;
        d["outside_tensor"] = record_dict(r.outside_tensor);
        d["outside_head"] = record_dict(r.outside_head);
        d["table"] = record_dict(r.table);
        d["rotated"] = r.rotated;
        d["left"] = r.left;
        d["not_visited"] = r.not_visited;
        d["rows"] = coverage_dict(r.rows);
        return d;
      },
      "elem"_a, "contract"_a, "x"_a, "out"_a, "half"_a, "interleaved"_a, "inplace"_a, "cos"_a, "sin"_a,
      "table_rows"_a, "varlen"_a, "cu_seqlens"_a, "max_seqlen"_a, "seqlen"_a, "per_sequence"_a, "offsets"_a,
      "fa_minor"_a = 8, "conjugate"_a = false, "threads"_a = 1,
      "the checked rotary (flash_attn 0, FLA 1) on CPU buffers (the CPU twin): writes out (x rotated), returns the "
      "refused accesses (outside_tensor, table), the performed ones outside the row's head, the (row, head) pairs "
      "rotated / left (a position outside the table), the rows no program visited, and the output rows no program "
      "wrote (a new tensor); cos, sin: fp32 (table_rows, half)");
  // ---- the record (both builds: the layout is the contract's) ----
  m.def("record_size", [] { return sizeof(ad::AccessRecord); }, "bytes of one AccessRecord");
  m.def(
      "empty_record",
      [] {
        const ad::AccessRecord r;
        return nb::bytes(reinterpret_cast<const char*>(&r), sizeof(r));
      },
      "the bytes of an empty AccessRecord (what a record is reset to before a checked launch)");
  m.def(
      "parse_record",
      [](int64_t ptr) {
        ad::AccessRecord r;
        std::memcpy(&r, as_host(ptr), sizeof(r));
        return record_dict(r);
      },
      "ptr"_a, "the record at host address ptr (a pinned copy of a device record) as the CPU functions return it");
#ifdef ATTN_DOCTOR_WITH_CUDA
  m.def(
      "varlen_fwd_cuda",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, int64_t cu_q, int64_t cu_k,
         int32_t batch, int64_t max_q, int64_t max_k, float scale, float softcap, bool causal, int64_t wl, int64_t wr,
         int64_t out, int64_t lse, int64_t record, int64_t stream, bool checked, int64_t seqused_k,
         int64_t row_writes) {
        ad::kern::VarlenFwdParams p;
        set_cuda_call(p, elem, q, k, v, cu_q, cu_k, batch, max_q, max_k, scale, softcap, causal, wl, wr);
        p.seqused_k = static_cast<const int32_t*>(as_ptr(seqused_k));
        p.row_writes = static_cast<uint32_t*>(as_ptr(row_writes));  // coverage: q[1] counters, zeroed
        p.row_writes_size = row_writes ? q[1] : 0;
        p.out = {as_ptr(out), q[1], static_cast<int32_t>(q[2])};
        p.lse = static_cast<float*>(as_ptr(lse));
        p.record = static_cast<ad::AccessRecord*>(as_ptr(record));
        ad::kern::launch_varlen_fwd(p, checked ? ad::Checks::checked : ad::Checks::unchecked,
                                    static_cast<cudaStream_t>(as_ptr(stream)));
        launched();
        return ad::kern::varlen_fwd_kernel_name(p, checked ? ad::Checks::checked : ad::Checks::unchecked);
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "batch"_a, "max_seqlen_q"_a,
      "max_seqlen_k"_a, "scale"_a, "softcap"_a, "causal"_a, "window_left"_a, "window_right"_a, "out"_a, "lse"_a,
      "record"_a, "stream"_a, "checked"_a = true, "seqused_k"_a = 0, "row_writes"_a = 0,
      "launches the varlen forward on `stream` (no synchronisation); returns the kernel's name; seqused_k: a device "
      "pointer to batch int32 entries, or 0; row_writes: zeroed uint32 counters, one per q row (the checked "
      "kernel counts the writes of each output row), or 0");
  m.def(
      "varlen_bwd_workspace",
      [](int64_t rows_q, int32_t heads, int32_t head_dim, int32_t batch, int64_t max_q, int64_t max_k) {
        const ad::kern::BwdWorkspace w = bwd_workspace(rows_q, heads, head_dim, batch, max_q, max_k);
        return std::make_tuple(w.softmax_d, w.dq_accum);
      },
      "rows_q"_a, "heads"_a, "head_dim"_a, "batch"_a, "max_seqlen_q"_a, "max_seqlen_k"_a,
      "(softmax_d, dq_accum) fp32 elements the backward's workspaces take");
  m.def(
      "varlen_bwd_supported",
      [](int elem, int32_t head_dim) {
        ad::kern::VarlenBwdParams p;
        p.elem = elem_of(elem);
        p.head_dim = head_dim;
        p.num_heads = p.num_heads_k = 1;
        p.batch = 1;
        p.max_seqlen_q = p.max_seqlen_k = 128;
        return ad::kern::varlen_bwd_unsupported(p);
      },
      "elem"_a, "head_dim"_a, "why the checked backward cannot run this element type and head dim (\"\": it can)");
  m.def(
      "varlen_bwd_cuda",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, int64_t out, int64_t dout, int64_t lse,
         int64_t dq, int64_t dk, int64_t dv, int64_t dk_expanded, int64_t dv_expanded, int64_t softmax_d,
         int64_t dq_accum, int64_t cu_q, int64_t cu_k, int32_t batch, int64_t max_q, int64_t max_k, float scale,
         float softcap, bool causal, int64_t wl, int64_t wr, int64_t record, int64_t stream, bool checked,
         int64_t seqused_k, int64_t dq_writes, int64_t dkv_writes) {
        ad::kern::VarlenBwdParams p;
        set_cuda_call(p, elem, q, k, v, cu_q, cu_k, batch, max_q, max_k, scale, softcap, causal, wl, wr);
        p.launch_check = true;  // the keys the backward leaves out (contract/fa2_backward.hpp)
        p.seqused_k = static_cast<const int32_t*>(as_ptr(seqused_k));
        const int64_t rows_q = q[1], rows_k = k[1];
        p.dq_writes = static_cast<uint32_t*>(as_ptr(dq_writes));  // coverage counters, zeroed (or 0)
        p.dq_writes_size = dq_writes ? rows_q : 0;
        p.dkv_writes = static_cast<uint32_t*>(as_ptr(dkv_writes));
        p.dkv_writes_size = dkv_writes ? rows_k : 0;
        set_bwd_tensors(p, q, k, out, dout, lse, dq, dk, dv, dk_expanded, dv_expanded);
        const ad::kern::BwdWorkspace w = ad::kern::varlen_bwd_workspace(p);
        p.softmax_d = static_cast<float*>(as_ptr(softmax_d));
        p.softmax_d_size = w.softmax_d;
        p.dq_accum = static_cast<float*>(as_ptr(dq_accum));
        p.dq_accum_size = w.dq_accum;
        p.record = static_cast<ad::AccessRecord*>(as_ptr(record));
        ad::kern::launch_varlen_bwd(p, checked ? ad::Checks::checked : ad::Checks::unchecked,
                                    static_cast<cudaStream_t>(as_ptr(stream)));
        launched();
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "out"_a, "dout"_a, "lse"_a, "dq"_a, "dk"_a, "dv"_a, "dk_expanded"_a,
      "dv_expanded"_a, "softmax_d"_a, "dq_accum"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "batch"_a, "max_seqlen_q"_a,
      "max_seqlen_k"_a, "scale"_a, "softcap"_a, "causal"_a, "window_left"_a, "window_right"_a, "record"_a, "stream"_a,
      "checked"_a = true, "seqused_k"_a = 0, "dq_writes"_a = 0, "dkv_writes"_a = 0,
      "launches the varlen backward's launches on `stream` (no synchronisation), with the launch check; seqused_k: "
      "the forward's (a device pointer to batch int32 entries, or 0); dq_writes / dkv_writes: zeroed uint32 "
      "counters per q / k row (coverage), or 0");
  // ---- attn_doctor.ops on CUDA: launch, readout and the queue of unread launches, in C++ ----
  m.def(
      "ops_fwd_cuda",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, int64_t cu_q, int64_t cu_k,
         int32_t batch, int64_t max_q, int64_t max_k, float scale, float softcap, bool causal, int64_t wl, int64_t wr,
         int64_t out, int64_t lse, int64_t stream_arg, int device, int64_t seqused_k, int64_t counters,
         nb::object payload) {
        ad::kern::VarlenFwdParams p;
        set_cuda_call(p, elem, q, k, v, cu_q, cu_k, batch, max_q, max_k, scale, softcap, causal, wl, wr);
        const auto stream = static_cast<cudaStream_t>(as_ptr(stream_arg));
        Launch launch(ops_state(), device, stream);
        uint32_t* rows = static_cast<uint32_t*>(as_ptr(counters));
        zero_counters(rows, q[1], stream);
        p.seqused_k = static_cast<const int32_t*>(as_ptr(seqused_k));
        p.row_writes = rows;
        p.row_writes_size = rows ? q[1] : 0;
        p.out = {as_ptr(out), q[1], static_cast<int32_t>(q[2])};
        p.lse = static_cast<float*>(as_ptr(lse));
        p.record = launch.record();
        ad::kern::launch_varlen_fwd(p, ad::Checks::checked, stream);
        launched();
        launch.finish(false, rows, q[1], nullptr, 0, std::move(payload));
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "batch"_a, "max_seqlen_q"_a,
      "max_seqlen_k"_a, "scale"_a, "softcap"_a, "causal"_a, "window_left"_a, "window_right"_a, "out"_a, "lse"_a,
      "stream"_a, "device"_a, "seqused_k"_a, "counters"_a, "payload"_a.none(),
      "the checked varlen forward of attn_doctor.ops on `stream` with its readout (no synchronisation): a ring "
      "slot and its record, the row counters zeroed (counters: uint32 per q row, or 0: not counted), the launch, "
      "the readout kernel; the launch waits in the queue with `payload` until ops_drain reads it");
  m.def(
      "ops_bwd_cuda",
      [](int elem, const TensorArg& q, const TensorArg& k, const TensorArg& v, int64_t out, int64_t dout, int64_t lse,
         int64_t dq, int64_t dk, int64_t dv, int64_t dk_expanded, int64_t dv_expanded, int64_t workspace,
         int64_t workspace_size, int64_t cu_q, int64_t cu_k, int32_t batch, int64_t max_q, int64_t max_k, float scale,
         float softcap, bool causal, int64_t wl, int64_t wr, int64_t stream_arg, int device, int64_t seqused_k,
         int64_t counters, nb::object payload) {
        ad::kern::VarlenBwdParams p;
        set_cuda_call(p, elem, q, k, v, cu_q, cu_k, batch, max_q, max_k, scale, softcap, causal, wl, wr);
        p.launch_check = true;  // the keys the backward leaves out (contract/fa2_backward.hpp)
        const int64_t rows_q = q[1], rows_k = k[1];
        if (static_cast<int32_t>(q[2]) != static_cast<int32_t>(k[2]) && (!dk_expanded || !dv_expanded))
          throw nb::value_error("a backward with fewer key/value heads takes dk_expanded and dv_expanded");
        set_bwd_tensors(p, q, k, out, dout, lse, dq, dk, dv, dk_expanded, dv_expanded);
        const ad::kern::BwdWorkspace w = ad::kern::varlen_bwd_workspace(p);
        const int64_t accum_at = ops_dq_accum_at(w);
        if (workspace_size < accum_at + w.dq_accum)
          throw nb::value_error(("the backward's workspace takes " + std::to_string(accum_at + w.dq_accum) +
                                 " fp32 elements, got " + std::to_string(workspace_size)).c_str());
        float* ws = static_cast<float*>(as_ptr(workspace));
        p.softmax_d = ws;
        p.softmax_d_size = w.softmax_d;
        p.dq_accum = ws + accum_at;
        p.dq_accum_size = w.dq_accum;
        const auto stream = static_cast<cudaStream_t>(as_ptr(stream_arg));
        Launch launch(ops_state(), device, stream);
        uint32_t* dq_rows = static_cast<uint32_t*>(as_ptr(counters));
        uint32_t* dkv_rows = dq_rows ? dq_rows + rows_q : nullptr;
        zero_counters(dq_rows, rows_q + rows_k, stream);
        p.seqused_k = static_cast<const int32_t*>(as_ptr(seqused_k));
        p.dq_writes = dq_rows;
        p.dq_writes_size = dq_rows ? rows_q : 0;
        p.dkv_writes = dkv_rows;
        p.dkv_writes_size = dkv_rows ? rows_k : 0;
        p.record = launch.record();
        ad::kern::launch_varlen_bwd(p, ad::Checks::checked, stream);
        launched();
        launch.finish(true, dq_rows, rows_q, dkv_rows, rows_k, std::move(payload));
      },
      "elem"_a, "q"_a, "k"_a, "v"_a, "out"_a, "dout"_a, "lse"_a, "dq"_a, "dk"_a, "dv"_a, "dk_expanded"_a,
      "dv_expanded"_a, "workspace"_a, "workspace_size"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "batch"_a,
      "max_seqlen_q"_a, "max_seqlen_k"_a, "scale"_a, "softcap"_a, "causal"_a, "window_left"_a, "window_right"_a,
      "stream"_a, "device"_a, "seqused_k"_a, "counters"_a, "payload"_a.none(),
      "the checked varlen backward of attn_doctor.ops on `stream` with its readout, as ops_fwd_cuda; workspace: "
      "fp32, ops_bwd_workspace(...) elements; counters: uint32 per q row then per k row, or 0");
  m.def(
      "ops_bwd_workspace",
      [](int64_t rows_q, int32_t heads, int32_t head_dim, int32_t batch, int64_t max_q, int64_t max_k) {
        const ad::kern::BwdWorkspace w = bwd_workspace(rows_q, heads, head_dim, batch, max_q, max_k);
        return std::max<int64_t>(ops_dq_accum_at(w) + w.dq_accum, 1);
      },
      "rows_q"_a, "heads"_a, "head_dim"_a, "batch"_a, "max_seqlen_q"_a, "max_seqlen_k"_a,
      "fp32 elements of ops_bwd_cuda's workspace");
  m.def("ops_drain", &ops_drain, "block"_a,
        "reads the unread launches in order: None when all read were clean (or, block false, the next has not "
        "landed), else (payload, result) of the first broken one, the later ones dropped");
  m.def("ops_captured", &ops_captured,
        "(payload, result) of the captured launches whose last replay was broken");
  m.def("ops_pending", [] { return ops_state().pending.size(); }, "launches not read yet");
  m.def(
      "ops_reset",
      [] {
        OpsState& s = ops_state();
        for (Entry& e : s.pending) s.retired.push_back(std::move(e));
        s.pending.clear();
        s.captured.clear();  // their slots stay taken: a graph replayed later writes them
        sweep_retired(s);
      },
      "drops the unread launches and the captured ones (tests, benchmarks)");
  m.def(
      "ops_set_readout",
      [](const std::string& mode) {
        if (mode != "poll" && mode != "event")
          throw nb::value_error(("readout: expected poll or event, found \"" + mode + "\"").c_str());
        ops_state().readout = mode == "poll" ? Readout::poll : Readout::event;
      },
      "mode"_a, "how the host learns that a launch's readout landed: poll (the slot's state) or event");
#endif
}
