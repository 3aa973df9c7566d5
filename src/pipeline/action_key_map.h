// A map keyed by a pipeline action (kind, stage, microbatch): a dense table when the ids are
// compact, a hash map otherwise. Shared by the lowering and the Program builder.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/action.h"

namespace sc {

/// An action as a hashable key.
struct ActionKey {
  ActionKind kind;
  int32_t stage;
  int32_t microbatch;  ///< -1 for kinds that take none (UNSHARD, RESHARD, REDUCE_GRAD)
  bool operator==(const ActionKey&) const = default;
};

struct ActionKeyHash {
  size_t operator()(const ActionKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.kind);
    h = h * 0x9E3779B97F4A7C15ull + static_cast<uint32_t>(k.stage);
    h = h * 0x9E3779B97F4A7C15ull + static_cast<uint32_t>(k.microbatch);
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

inline ActionKey key_of(const Action& a) { return {a.kind, a.stage, a.microbatch}; }

/// A map from action keys to T. Dense (a table per kind, indexed by stage and microbatch: O(1)
/// without hashing, and 1 + sizeof(T) bytes a cell, where a hash node costs about 40 bytes and a
/// cache miss) when stages x microbatches x kinds is at most 4 x `entries` + 4096, as in
/// generated and real schedules; a kind's table is allocated at its first insert, so a map
/// costs only the kinds it holds (a comms CSV's program builder holds 6 of the 16 kinds; all 16
/// tables of its 3.1 M-op 1F1B took 40 MB a map). Keys outside the tables (negative or
/// out-of-range ids), or every key when the ids are sparse, go to a hash map. Measured on 1F1B
/// p = 64, m = 8192 (3.1 M ops): the Program builder's per-action maps went from hash maps to
/// this table (README, scaling).
template <typename T>
class ActionKeyMap {
 public:
  /// `stages` and `microbatches` bound the ids of most keys; `entries` is about how many keys come.
  ActionKeyMap(int32_t stages = 0, int32_t microbatches = 0, size_t entries = 0)
      : stages_(std::max(stages, 0)), microbatches_(std::max(microbatches, 0)) {
    const uint64_t cells = static_cast<uint64_t>(kNumActionKinds) * static_cast<uint64_t>(stages_) *
                           static_cast<uint64_t>(microbatches_);
    dense_ok_ = cells > 0 && cells <= 4 * static_cast<uint64_t>(entries) + 4096;
    if (!dense_ok_) sparse_.reserve(entries);
  }
  /// Inserts unless present; false when `k` was present (its value is kept).
  bool try_emplace(const ActionKey& k, const T& v) {
    const int64_t i = slot(k);
    if (i < 0) return sparse_.try_emplace(k, v).second;
    Table& t = table(k.kind);
    if (t.used[i]) return false;
    t.used[i] = 1;
    t.values[i] = v;
    return true;
  }
  /// Inserts or overwrites.
  void assign(const ActionKey& k, const T& v) {
    const int64_t i = slot(k);
    if (i < 0) {
      sparse_[k] = v;
      return;
    }
    Table& t = table(k.kind);
    t.used[i] = 1;
    t.values[i] = v;
  }
  /// The value of `k`, or null.
  const T* find(const ActionKey& k) const {
    const int64_t i = slot(k);
    if (i >= 0) {
      const Table& t = tables_[static_cast<size_t>(k.kind)];
      return !t.used.empty() && t.used[i] ? &t.values[i] : nullptr;
    }
    auto it = sparse_.find(k);
    return it == sparse_.end() ? nullptr : &it->second;
  }

 private:
  struct Table {
    std::vector<T> values;
    std::vector<uint8_t> used;
  };
  /// The cell of `k` in its kind's table, or -1 for the hash map.
  int64_t slot(const ActionKey& k) const {
    if (!dense_ok_ || k.stage < 0 || k.stage >= stages_ || k.microbatch < 0 || k.microbatch >= microbatches_)
      return -1;
    return static_cast<int64_t>(k.stage) * microbatches_ + k.microbatch;
  }
  Table& table(ActionKind kind) {
    Table& t = tables_[static_cast<size_t>(kind)];
    if (t.used.empty()) {
      const size_t cells = static_cast<size_t>(stages_) * static_cast<size_t>(microbatches_);
      t.values.resize(cells);
      t.used.assign(cells, 0);
    }
    return t;
  }
  int32_t stages_, microbatches_;
  bool dense_ok_ = false;
  std::array<Table, kNumActionKinds> tables_;
  std::unordered_map<ActionKey, T, ActionKeyHash> sparse_;
};

}  // namespace sc
