#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "report/report.h"
#include "report/view.h"
#include "support/units.h"

namespace sc {
namespace {

// Colours by what an op does (Tableau 10, which stays apart for colour-blind readers).
struct Kind {
  const char* name;
  const char* fill;
};
constexpr std::array<Kind, 10> kKinds = {{{"F forward", "#4e79a7"},
                                          {"B backward", "#59a14f"},
                                          {"I backward (inputs)", "#8cd17d"},
                                          {"W backward (weights)", "#f28e2b"},
                                          {"F;B overlapped", "#b07aa1"},
                                          {"send", "#9c755f"},
                                          {"recv", "#bab0ac"},
                                          {"collective", "#76b7b2"},
                                          {"other compute", "#edc948"},
                                          {"marker", "#333333"}}};
constexpr const char* kStuck = "#e15759";

/// The colour of op `op` of `p`. A compute op without pipeline actions (an FSDP unit's forward
/// or backward, labelled "F unit (mb 0)" / "B unit (mb 0)" by the FSDP lowering) takes the kind
/// its label starts with; any other is "other compute".
size_t kind_of(const Program& p, const Op& op) {
  switch (op.kind) {
    case OpKind::kSend: return 5;
    case OpKind::kRecv: return 6;
    case OpKind::kCollective: return 7;
    case OpKind::kMarker: return 9;
    case OpKind::kCompute: break;
  }
  if (op.num_actions == 2) return 4;
  if (op.num_actions == 0) {
    const int32_t n = op.name();
    if (n < 0 || n >= static_cast<int32_t>(p.names.size())) return 8;
    const std::string& label = p.names[n];
    if (label.size() < 2 || label[1] != ' ') return 8;
    switch (label[0]) {
      case 'F': return 0;
      case 'B': return 1;
      case 'I': return 2;
      case 'W': return 3;
      default: return 8;
    }
  }
  switch (op.actions[0].kind) {
    case ActionKind::kF: return 0;
    case ActionKind::kB: return 1;
    case ActionKind::kI: return 2;
    case ActionKind::kW: return 3;
    default: return 8;
  }
}

std::string xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Where things go, in pixels. Each rank has a lane per stream, then a memory strip.
struct Layout {
  static constexpr double kLeft = 170, kTop = 118, kPlotWidth = 1400, kRight = 190, kGap = 4;
  double lane_h = 20, mem_h = 20;
  int64_t total_ns = 1;
  std::vector<double> lane_y;  ///< per stream: top of its lane
  std::vector<double> mem_y;   ///< per rank: top of its memory strip
  double height = 0;
  double width() const { return kLeft + kPlotWidth + kRight; }
  double x(int64_t ns) const { return kLeft + kPlotWidth * static_cast<double>(ns) / static_cast<double>(total_ns); }
};

/// Which ranks get lanes: the first of each run of consecutive ranks alike in every figure
/// (rank_rows) when the schedule completes; every rank of one that does not (a stuck rank must
/// show where it stops). `run_of[rank]` is the run a rank belongs to.
struct Folding {
  std::vector<RankRun> runs;
  std::vector<int32_t> run_of;
  std::vector<char> shown;
};

Folding fold_ranks(const VerifyResult& r) {
  Folding f;
  const int32_t n = r.program.num_ranks;
  std::vector<std::string> rows = r.execution.stuck.empty() ? rank_rows(r) : std::vector<std::string>();
  if (rows.size() != static_cast<size_t>(n)) {
    rows.clear();
    for (int32_t k = 0; k < n; ++k) rows.push_back(std::to_string(k));  // every rank its own run
  }
  f.runs = fold_identical_rows(rows);
  f.run_of.assign(static_cast<size_t>(n), 0);
  f.shown.assign(static_cast<size_t>(n), 0);
  for (size_t i = 0; i < f.runs.size(); ++i) {
    f.shown[static_cast<size_t>(f.runs[i].first)] = 1;
    for (int32_t k = f.runs[i].first; k <= f.runs[i].last; ++k) f.run_of[static_cast<size_t>(k)] = static_cast<int32_t>(i);
  }
  return f;
}

// `scale_ns`: the time the plot's width stands for (0: this timeline's own end). Streams and
// memory strips of ranks not shown get no lane (y -1).
Layout make_layout(const Program& p, const TimelineView& v, int64_t scale_ns, const std::vector<char>& shown) {
  Layout l;
  l.total_ns = std::max<int64_t>(scale_ns > 0 ? scale_ns : v.end_ns_total, 1);
  double lanes = 0;
  for (int32_t rank = 0; rank < p.num_ranks; ++rank)
    if (shown[static_cast<size_t>(rank)]) lanes += static_cast<double>(p.rank_streams[rank].size()) + 1.2;
  l.lane_h = std::clamp(std::floor(1400 / std::max(lanes, 1.0)), 6.0, 20.0);
  l.mem_h = std::max(8.0, std::floor(l.lane_h * 1.2));
  double y = Layout::kTop;
  l.lane_y.assign(p.streams.size(), -1);
  l.mem_y.assign(p.num_ranks, -1);
  for (int32_t rank = 0; rank < p.num_ranks; ++rank) {
    if (!shown[static_cast<size_t>(rank)]) continue;
    for (int32_t s : p.rank_streams[rank]) {
      l.lane_y[s] = y;
      y += l.lane_h;
    }
    l.mem_y[rank] = y;
    y += l.mem_h + Layout::kGap;
  }
  l.height = y + 40;
  return l;
}

class SvgWriter {
 public:
  SvgWriter(const VerifyResult& r, const TimelineView& v, int64_t scale_ns)
      : r_(r), p_(r.program), v_(v), fold_(fold_ranks(r)), l_(make_layout(p_, v_, scale_ns, fold_.shown)) {}

  double width() const { return l_.width(); }
  double height() const { return l_.height; }

  /// The picture's elements (no <svg> around them), drawn from y = 0.
  std::string draw() {
    out_ += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#ffffff\"/>\n", l_.width(), l_.height);
    lanes();
    ops();
    collectives();
    arrows();
    memory();
    stuck();
    header();
    return std::move(out_);
  }

 private:
  double lane_mid(int32_t stream) const { return l_.lane_y[stream] + l_.lane_h / 2; }
  bool has_lane(int32_t stream) const { return l_.lane_y[stream] >= 0; }

  /// A lane's label: the stream's own ("rank 3 compute"), or for the first rank of a folded
  /// run its ranks and their number ("ranks 0-15 (16) compute").
  std::string lane_label(int32_t s) const {
    const int32_t rank = p_.streams[s].rank;
    const RankRun& built = fold_.runs[static_cast<size_t>(fold_.run_of[static_cast<size_t>(rank)])];
    // The job ranks the run's built ranks stand for (Program::rank_classes: a symmetry
    // quotient's one built rank is all of them).
    const RankClass a = p_.job_class(built.first), b = p_.job_class(built.last);
    const RankRun run{a.first, b.first + b.count - 1};
    if (run.count() == 1) return p_.stream_label(s);
    return fmt::format("ranks {} ({}) {}", run.label(), run.count(), p_.streams[s].name);
  }

  void lanes() {
    // Labels shrink to fit the lane, but never below 7 px, and never vanish: a lane too thin for
    // that gets its label at 7 px all the same.
    double font = std::max(7.0, std::min(12.0, l_.lane_h - 1));
    if (static_cast<int64_t>(fold_.runs.size()) < p_.job_ranks())
      notes_.push_back(fmt::format("{} drawn in {}: consecutive ranks alike in every figure (start, end, "
                                   "busy, idle, peak and worst-case memory) are drawn once, their lanes labelled with "
                                   "their ranks and number", format_count(p_.job_ranks(), "rank"),
                                   format_count(static_cast<int64_t>(fold_.runs.size()), "group")));
    for (size_t s = 0; s < p_.streams.size(); ++s) {
      if (!has_lane(static_cast<int32_t>(s))) continue;
      out_ += fmt::format("<rect class=\"lane\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#f1f1f1\"/>\n",
                          Layout::kLeft, l_.lane_y[s] + 0.5, Layout::kPlotWidth, l_.lane_h - 1);
      // A long label ("ranks 1024-2047 (1024) all-gather") shrinks to fit the margin, to 5 px.
      const std::string label = lane_label(static_cast<int32_t>(s));
      const double fit = std::max(5.0, std::min(font, (Layout::kLeft - 12) / (0.6 * static_cast<double>(label.size()))));
      out_ += fmt::format("<text class=\"lane-label\" x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:.1f}\" "
                          "text-anchor=\"end\">{}</text>\n",
                          Layout::kLeft - 6, lane_mid(static_cast<int32_t>(s)) + fit * 0.35, fit, xml(label));
    }
  }

  // Each op wider than a pixel is a rectangle, labelled where the label fits; narrower ops are
  // merged per pixel column, which takes the colour of the kind covering most of it.
  void ops() {
    for (size_t s = 0; s < p_.streams.size(); ++s) {
      if (!has_lane(static_cast<int32_t>(s))) continue;
      std::map<int64_t, std::array<double, kKinds.size()>> merged;
      for (OpId id : p_.streams[s].ops) {
        if (!v_.ran[id]) continue;
        double x0 = l_.x(v_.start_ns[id]), x1 = l_.x(v_.end_ns[id]);
        size_t k = kind_of(p_, p_.ops[id]);
        if (x1 - x0 < 1.0) {
          auto& cover = merged[static_cast<int64_t>(std::floor(x0))];
          cover[k] += std::max(x1 - x0, 0.05);
          ++merged_ops_;
          continue;
        }
        op_rect(id, x0, x1, k);
      }
      double y = l_.lane_y[s] + 1.5, h = l_.lane_h - 3;
      for (const auto& [px, cover] : merged) {
        size_t best = static_cast<size_t>(std::max_element(cover.begin(), cover.end()) - cover.begin());
        double sum = 0;
        for (double c : cover) sum += c;
        out_ += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"1\" height=\"{:.1f}\" fill=\"{}\" fill-opacity=\"{:.2f}\"/>\n",
                            px, y, h, kKinds[best].fill, std::clamp(sum, 0.35, 1.0));
      }
    }
  }

  void op_rect(OpId id, double x0, double x1, size_t k) {
    const Op& op = p_.ops[id];
    double y = l_.lane_y[op.stream] + 1.5, h = l_.lane_h - 3, w = x1 - x0;
    std::string label = p_.label(id);
    out_ += fmt::format("<rect class=\"op\" data-op=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"{}>"
                        "<title>{} ({}, {} to {})</title></rect>\n",
                        id, x0, y, w, h, kKinds[k].fill, w >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.6\"" : "",
                        xml(label), p_.stream_label(op.stream), format_duration(v_.start_ns[id] * 1e-9),
                        format_duration(v_.end_ns[id] * 1e-9));
    // The largest font from 11 px down to 7 px at which the label fits in the op.
    double font = std::min({11.0, h - 2, (w - 3) / (0.62 * static_cast<double>(label.size()))});
    if (font >= 7)
      out_ += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" font-size=\"{:.0f}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
                          x0 + w / 2, y + h / 2 + font * 0.35, font, k == 9 || k == 5 ? "#ffffff" : "#111111", xml(label));
  }

  // A collective: one vertical bar through its members' lanes, at its start.
  void collectives() {
    size_t drawn = 0;
    for (OpId id = 0; id < static_cast<OpId>(p_.ops.size()); ++id) {
      const Op& op = p_.ops[id];
      if (!v_.ran[id] || op.kind != OpKind::kCollective || op.comm() < 0) continue;
      std::vector<OpId> members = p_.instance(id);
      auto first = std::find_if(members.begin(), members.end(), [](OpId m) { return m != kNoOp; });
      if (first == members.end() || *first != id) continue;
      double top = 1e18, bottom = -1e18;
      for (OpId m : members)
        if (m != kNoOp && has_lane(p_.ops[m].stream)) {
          top = std::min(top, lane_mid(p_.ops[m].stream));
          bottom = std::max(bottom, lane_mid(p_.ops[m].stream));
        }
      if (bottom <= top) continue;
      if (++drawn > kMaxLines) continue;
      double x = l_.x(v_.start_ns[id]) + 0.5;
      out_ += fmt::format("<line class=\"collective\" x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#3b8f8a\" "
                          "stroke-width=\"1.2\" stroke-opacity=\"0.7\"/>\n",
                          x, top, x, bottom);
    }
    if (drawn > kMaxLines) notes_.push_back(fmt::format("{} collectives spanning ranks, too many to draw", drawn));
  }

  // Point-to-point messages (send to recv, at the recv's end) and implicit transfers (producer's
  // end to consumer's start).
  void arrows() {
    if (v_.arrows.size() > kMaxLines) {
      notes_.push_back(fmt::format("{} arrows between ranks not drawn (more than {})", v_.arrows.size(), kMaxLines));
      return;
    }
    for (const Arrow& a : v_.arrows) {
      if (!has_lane(p_.ops[a.from].stream) || !has_lane(p_.ops[a.to].stream)) continue;
      int64_t to_ns = a.kind == Arrow::Kind::kMessage ? v_.end_ns[a.to] : v_.start_ns[a.to];
      out_ += fmt::format("<line class=\"arrow\" x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#333\" "
                          "stroke-width=\"0.8\" stroke-opacity=\"0.6\" marker-end=\"url(#head)\"/>\n",
                          l_.x(v_.end_ns[a.from]), lane_mid(p_.ops[a.from].stream), l_.x(to_ns), lane_mid(p_.ops[a.to].stream));
    }
  }

  // Live bytes per rank as a step curve, on one scale for all ranks, with the limit in red.
  void memory() {
    const auto& curves = v_.timeline.memory_curve;
    // One scale for all ranks, from 0 to the largest peak (the limit too when it is near: a
    // limit far above every peak would flatten the curves, so it is named instead of drawn).
    const auto& given = r_.spec.memory.limit_bytes;
    double limit = given ? static_cast<double>(*given) : -1;  // bytes; -1: none drawn
    double top_bytes = 0;
    for (const auto& c : curves)
      for (const auto& pt : c) top_bytes = std::max(top_bytes, static_cast<double>(pt.second));
    if (limit >= 0 && limit <= 1.5 * top_bytes) top_bytes = std::max(top_bytes, limit);
    if (top_bytes <= 0) return;
    top_bytes *= 1.08;
    if (limit > top_bytes) {
      notes_.push_back(fmt::format("memory strips run from 0 to {}; the limit, {}, is above every peak",
                                   format_bytes(top_bytes), format_bytes(limit)));
      limit = -1;
    }
    double font = std::min(10.0, l_.mem_h);
    for (int32_t rank = 0; rank < p_.num_ranks && rank < static_cast<int32_t>(curves.size()); ++rank) {
      if (l_.mem_y[rank] < 0) continue;
      double y0 = l_.mem_y[rank], h = l_.mem_h;
      auto y = [&](double bytes) { return y0 + h - h * bytes / top_bytes; };
      std::string path;
      int64_t peak = 0;
      for (const auto& [t, bytes] : curves[rank]) {
        double x = l_.x(to_ns(t));
        path += path.empty() ? fmt::format("M{:.2f},{:.2f}", x, y(static_cast<double>(bytes)))
                             : fmt::format(" H{:.2f} V{:.2f}", x, y(static_cast<double>(bytes)));
        peak = std::max(peak, bytes);
      }
      if (!path.empty())
        out_ += fmt::format("<path class=\"memory\" d=\"{} H{:.2f}\" fill=\"none\" stroke=\"#555555\" stroke-width=\"1\"/>\n",
                            path, Layout::kLeft + Layout::kPlotWidth);
      limit_drawn_ = limit >= 0;
      if (limit_drawn_)
        out_ += fmt::format("<line class=\"limit\" x1=\"{:.1f}\" y1=\"{:.2f}\" x2=\"{:.1f}\" y2=\"{:.2f}\" stroke=\"{}\" "
                            "stroke-width=\"1\" stroke-dasharray=\"4,3\"/>\n",
                            Layout::kLeft, y(limit), Layout::kLeft + Layout::kPlotWidth, y(limit), kStuck);
      if (font >= 6)
        out_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{:.0f}\" fill=\"#555555\">peak {}</text>\n",
                            Layout::kLeft + Layout::kPlotWidth + 6, y0 + h / 2 + font * 0.35, font,
                            format_bytes(static_cast<double>(peak)));
    }
  }

  // Where each stuck stream stops, what it waits for, and the wait-for cycle in red.
  void stuck() {
    std::map<int32_t, double> marker_x;
    double font = std::min(11.0, l_.lane_h - 2);
    for (const auto& st : r_.execution.stuck) {
      double x = l_.x(stop_ns(r_, v_, st.stream));
      marker_x[st.stream] = x;
      out_ += fmt::format("<rect class=\"stuck\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"3\" height=\"{:.1f}\" fill=\"{}\">"
                          "<title>{}</title></rect>\n",
                          x, l_.lane_y[st.stream], l_.lane_h, kStuck, xml("stuck at " + p_.label(st.op) + ": " + st.why));
      if (font >= 6)
        out_ += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\" font-size=\"{:.0f}\" fill=\"{}\">stuck at {}</text>\n", x + 6,
                            lane_mid(st.stream) + font * 0.35, font, kStuck, xml(p_.label(st.op)));
    }
    const auto& cyc = r_.execution.cycle;
    for (size_t i = 0; i + 1 < cyc.size() || (r_.execution.cycle_closed && i < cyc.size() && cyc.size() > 1); ++i) {
      int32_t a = p_.ops[cyc[i]].stream, b = p_.ops[cyc[(i + 1) % cyc.size()]].stream;
      if (!marker_x.count(a) || !marker_x.count(b)) continue;
      out_ += fmt::format("<line class=\"waits\" x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                          "stroke-width=\"1.6\" marker-end=\"url(#stuckhead)\"/>\n",
                          marker_x[a] + 1.5, lane_mid(a), marker_x[b] + 1.5, lane_mid(b), kStuck);
    }
  }

  void header() {
    const Timeline& t = v_.timeline;
    std::string title = fmt::format("{}: {}, {}, {}", r_.spec.name, r_.verdict(), format_count(p_.job_ranks(), "rank"),
                                    format_count(static_cast<int64_t>(p_.ops.size()), "op"));
    if (v_.complete)
      title += fmt::format(" | makespan {}, bubble rate {:.3f}", format_duration(t.makespan_s), t.bubble_rate);
    else
      title += " | stuck: the executed prefix up to where each stream stops";
    out_ += fmt::format("<text x=\"{:.0f}\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{}</text>\n", Layout::kLeft, xml(title));
    std::string sub = fmt::format("time 0 to {} left to right ({} per pixel); grey lane: idle; lower strip: live memory{}",
                                  format_duration(static_cast<double>(l_.total_ns) * 1e-9),
                                  format_duration(static_cast<double>(l_.total_ns) * 1e-9 / Layout::kPlotWidth),
                                  limit_drawn_ ? fmt::format(" (red dashes: the limit, {})",
                                                             format_bytes(static_cast<double>(*r_.spec.memory.limit_bytes)))
                                               : "");
    for (const Finding& f : r_.findings)
      if (f.kind == FindingKind::kDeadlock) {
        notes_.insert(notes_.begin(), f.message);
        break;
      }
    if (merged_ops_)
      notes_.push_back(fmt::format("{} ops narrower than a pixel are merged: such a pixel column takes the colour of the "
                                   "kind covering most of it",
                                   merged_ops_));
    out_ += fmt::format("<text x=\"{:.0f}\" y=\"40\" font-size=\"11\" fill=\"#333\">{}</text>\n", Layout::kLeft, xml(sub));
    double x = Layout::kLeft;
    for (const Kind& k : kKinds) {
      out_ += fmt::format("<rect x=\"{:.0f}\" y=\"50\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0f}\" y=\"59\" "
                          "font-size=\"10\">{}</text>\n",
                          x, k.fill, x + 13, k.name);
      x += 16 + 6.2 * static_cast<double>(std::string(k.name).size());
    }
    double y = 76;
    for (const auto& n : notes_) {
      out_ += fmt::format("<text class=\"note\" x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"11\" fill=\"{}\">{}</text>\n",
                          Layout::kLeft, y, n.find("deadlock") != std::string::npos || n.find("hang") != std::string::npos
                                                ? kStuck : "#333",
                          xml(n));
      y += 13;
    }
    // The notes may push the lanes down: they sit above the plot in the reserved band.
  }

  static constexpr size_t kMaxLines = 5000;
  const VerifyResult& r_;
  const Program& p_;
  const TimelineView& v_;
  Folding fold_;
  Layout l_;
  std::string out_;
  std::vector<std::string> notes_;
  size_t merged_ops_ = 0;
  bool limit_drawn_ = false;
};

// The document around pictures of `width` x `height` px: the arrowheads they share, then `body`.
std::string document(double width, double height, const std::string& body) {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
                     "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
                     width, height, width, height) +
         "<defs><marker id=\"head\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"6\" markerHeight=\"6\" "
         "orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#333\"/></marker>"
         "<marker id=\"stuckhead\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"7\" markerHeight=\"7\" "
         "orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"" +
         std::string(kStuck) + "\"/></marker></defs>\n" + body + "</svg>\n";
}

}  // namespace

std::string svg_timeline(const VerifyResult& r) {
  TimelineView v = timeline_view(r);
  SvgWriter w(r, v, 0);
  std::string body = w.draw();
  return document(w.width(), w.height(), body);
}

std::string svg_timelines(const std::vector<const VerifyResult*>& results) {
  std::vector<TimelineView> views;
  int64_t scale_ns = 1;
  for (const VerifyResult* r : results) {
    views.push_back(timeline_view(*r));
    scale_ns = std::max(scale_ns, views.back().end_ns_total);
  }
  std::string body;
  double width = 0, y = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    SvgWriter w(*results[i], views[i], scale_ns);
    body += fmt::format("<g class=\"timeline\" transform=\"translate(0,{:.0f})\">\n", y) + w.draw() + "</g>\n";
    width = std::max(width, w.width());
    y += w.height();
  }
  return document(width, y, body);
}

}  // namespace sc
