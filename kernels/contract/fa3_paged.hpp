// FlashAttention-3's paged KV as its kernel addresses it: key j of sequence b is row
// j % page_size of page page_table[b][j / page_size] of the k / v pool (num_pages, page_size,
// heads, dim). Read from Dao-AILab/flash-attention v2.8.3 hopper/paged_kv.h
// (PagedKVManager::load_page_table: page_size_divmod.divmod of the key row, then
// mPageTable[page_idx], a row slice of the table read without a bound, only for rows below
// seqlen_k) and hopper/flash_api.cpp mha_fwd (a page table whose last dimension is
// contiguous; the batch describes a row-major table, so row b starts at b * pages_per_seq).
//
// One definition for the CPU twin (lib/exec/cpu/cpu_attention.cpp) and, later, a CUDA kernel:
// the checked form refuses (records, never performs) a read past the end of the table and a
// k / v read through a page index outside [0, num_pages). An index past the row but inside
// the table is what the kernel reads: the next row's entries (another sequence's pages).
#pragma once

#include <cstdint>

#include "contract/host_device.hpp"

namespace ad::fa3 {

// The table and the pool as the kernel receives them.
struct PagedKV {
  const int64_t* table = nullptr;  // page_table, row-major (rows x pages_per_seq)
  int64_t entries = 0;             // rows * pages_per_seq
  int64_t pages_per_seq = 0;       // max_num_pages_per_seq (page_table.size(1))
  int64_t page_size = 1;           // k_cache.size(1)
  int64_t num_pages = 0;           // k_cache.size(0)
  AD_HD int64_t pool_rows() const { return num_pages * page_size; }
};

enum class PagedStatus : uint8_t {
  ok = 0,            // a row of the pool
  past_table = 1,    // the table entry lies past the end of page_table: refused
  outside_pool = 2,  // the entry names a page outside [0, num_pages): the k / v read is refused
};

struct PagedRow {
  PagedStatus status = PagedStatus::ok;
  int64_t entry = 0;  // flat index into page_table (b * pages_per_seq + j / page_size)
  int64_t page = -1;  // page_table's value there (-1 past the table)
  int64_t row = -1;   // the pool row read (page * page_size + j % page_size); past the pool's
                      // ends when outside_pool (saturated at +-2^62), -1 past the table
};

// Key j (>= 0) of sequence b (>= 0).
AD_HD PagedRow paged_row(const PagedKV& kv, int64_t b, int64_t j) {
  PagedRow r;
  r.entry = b * kv.pages_per_seq + j / kv.page_size;
  if (r.entry < 0 || r.entry >= kv.entries) {
    r.status = PagedStatus::past_table;
    return r;
  }
  r.page = kv.table[r.entry];
  const int64_t offset = j % kv.page_size;
  if (r.page < 0 || r.page >= kv.num_pages) {
    r.status = PagedStatus::outside_pool;
    constexpr int64_t kCap = int64_t{1} << 62;
    // |page| <= 2^62 and page_size < 2^31: saturate instead of overflowing
    const int64_t lim = kCap / kv.page_size;
    r.row = r.page > lim ? kCap : r.page < -lim ? -kCap : r.page * kv.page_size + offset;
    return r;
  }
  r.row = r.page * kv.page_size + offset;
  return r;
}

// The first key of sequence b whose table entry lies past the end of the table: every key
// from there on is refused (0 when the sequence's row starts past the table).
AD_HD int64_t first_key_past_table(const PagedKV& kv, int64_t b) {
  const int64_t left = kv.entries - b * kv.pages_per_seq;
  return left > 0 ? left * kv.page_size : 0;
}

// The keys [j, end) that share key j's table entry (one page's rows).
AD_HD int64_t page_run_end(const PagedKV& kv, int64_t j, int64_t end) {
  const int64_t next = (j / kv.page_size + 1) * kv.page_size;
  return next < end ? next : end;
}

// The refused reads among keys [j0, j1) of sequence b, one page at a time: keys through a page
// outside the pool (each refuses its k and its v row) and keys whose entry lies past the table
// (each refuses the table read). The first of each, in key order.
struct PagedRefusals {
  int64_t outside_pool = 0;     // keys read through a page outside [0, num_pages)
  int64_t first_outside = -1;   // the first such key, and its address
  PagedRow first_outside_row;
  int64_t past_table = 0;       // keys whose entry lies past the table
  int64_t first_past = -1;      // the first such key
};
AD_HD PagedRefusals paged_refusals(const PagedKV& kv, int64_t b, int64_t j0, int64_t j1) {
  PagedRefusals r;
  const int64_t past = first_key_past_table(kv, b);
  const int64_t in_end = j1 < past ? j1 : past;
  for (int64_t j = j0; j < in_end;) {
    const int64_t e = page_run_end(kv, j, in_end);
    const PagedRow row = paged_row(kv, b, j);
    if (row.status == PagedStatus::outside_pool) {
      if (r.first_outside < 0) {
        r.first_outside = j;
        r.first_outside_row = row;
      }
      r.outside_pool += e - j;
    }
    j = e;
  }
  const int64_t p0 = j0 > past ? j0 : past;
  if (j1 > p0) {
    r.past_table = j1 - p0;
    r.first_past = p0;
  }
  return r;
}

}  // namespace ad::fa3
