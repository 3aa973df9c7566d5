// What the timeline pictures (Chrome trace, SVG) draw: the op times of a completed run,
// or of the executed prefix of a stuck one, in integer nanoseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "check/verify.h"

namespace sc {

/// An arrow of a timeline picture: data leaves `from` at its end and `to` consumes it.
/// kMessage: a send and its matched recv. kTransfer: an implicit cross-rank transfer of a
/// compute-only schedule (a DepKind::kTransfer dependency), producer to consumer.
struct Arrow {
  enum class Kind : uint8_t { kMessage, kTransfer };
  OpId from = kNoOp;
  OpId to = kNoOp;
  Kind kind = Kind::kMessage;
};

/// The timeline of a verify result as the pictures draw it. When the program completes,
/// `timeline` is the prediction and every op ran; when it is stuck, `timeline` is the
/// simulation of the executed prefix (execute()'s `order`) and only the ops that completed
/// ran (`ran[id]` is 1). `start_ns`/`end_ns` are the op times rounded to nanoseconds (each
/// end is computed from the rounded end time, so ops of one stream never overlap after
/// rounding; an op that did not run has 0, 0). `arrows` lists every message and transfer
/// whose two ops ran, in op order. `end_ns_total` is the latest end (0 when nothing ran).
struct TimelineView {
  Timeline timeline;
  std::vector<uint8_t> ran;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<Arrow> arrows;
  int64_t end_ns_total = 0;
  bool complete = false;
};

/// Builds the view of `r` (see TimelineView). Never fails.
TimelineView timeline_view(const ProgramResult& r);

/// Seconds to the nearest nanosecond.
int64_t to_ns(double seconds);

/// Where stream `stream` stops in a stuck run: the end of its last completed op, in ns (0 when
/// it completed none).
int64_t stop_ns(const ProgramResult& r, const TimelineView& v, int32_t stream);

}  // namespace sc
