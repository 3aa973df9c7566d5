// Worst-case memory per rank: a prefix scan when a rank's effects are totally ordered, else a
// maximum-weight closure solved as a minimum s-t cut (Picard 1976) with Boost.Graph.
#include "graph/worst_case_memory.h"

#include "graph/happens_before.h"

#include <algorithm>
#include <cassert>
#include <memory>
#include <utility>

#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/range/iterator_range.hpp>

namespace sc {
namespace {

inline OpId event_op(int32_t event) { return event >> 1; }
inline bool is_end_event(int32_t event) { return (event & 1) != 0; }

/// Witness helper: the buffers of `rank` with net positive bytes over `events`, sorted.
/// `net` is scratch of Program::buffers' size, all zero on entry and on return.
std::vector<int32_t> live_buffers_of(const Program& p, int32_t rank, const std::vector<int32_t>& events,
                                     std::vector<int64_t>& net) {
  std::vector<int32_t> touched;
  for (int32_t e : events) {
    const OpId op = event_op(e);
    if (p.ops[op].rank != rank) continue;
    const bool at_end = is_end_event(e);
    for (const MemEffect* m = p.mem_begin(op); m != p.mem_end(op); ++m) {
      if (m->at_end != at_end || m->buffer < 0) continue;
      if (net[m->buffer] == 0) touched.push_back(m->buffer);
      net[m->buffer] += m->bytes;
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::vector<int32_t> live;
  for (int32_t b : touched) {
    if (net[b] > 0) live.push_back(b);
    net[b] = 0;
  }
  return live;
}

/// The moment found for one rank: its weight (bytes above static) and its events.
struct Moment {
  int64_t bytes = 0;
  std::vector<int32_t> events;
  std::vector<OpId> running;  ///< ops of the rank started and not finished
};

/// Fast path, exact when the rank's weighted events are totally ordered (a chain): every
/// moment meets the chain in a prefix, so the maximum is the maximum prefix sum. The moment
/// returned is the down-closure of the earliest maximum prefix, the smallest maximum closure
/// (any maximum closure contains that prefix, hence its down-closure). `chain` lists the
/// rank's events of nonzero weight in topological order; `weight` is indexed by local index
/// (position in order.events()). Returns false, computing nothing,
/// when two consecutive ones are unordered (then no total order exists).
bool scan_chain(const Program& p, const RankOrder& order, const std::vector<int32_t>& chain,
                const std::vector<int64_t>& weight, Moment& best) {
  for (size_t i = 1; i < chain.size(); ++i)
    if (!order.ordered(order.events()[chain[i - 1]], order.events()[chain[i]])) return false;
  int64_t sum = 0;
  int32_t last = -1;  // local index of the last event of the best prefix
  for (int32_t i : chain) {
    sum += weight[i];
    if (sum > best.bytes) {
      best.bytes = sum;
      last = i;
    }
  }
  if (last < 0) return true;
  for (int k = 0; k < order.width(); ++k) {
    const int32_t below = order.prefix(last, k);
    for (int32_t j = 0; j < below; ++j) best.events.push_back(order.stream_event(k, j));
    if (below % 2 == 1) best.running.push_back(p.streams[order.streams()[k]].ops[below / 2]);
  }
  std::sort(best.events.begin(), best.events.end());
  std::sort(best.running.begin(), best.running.end());
  return true;
}

/// The one-stream case of scan_chain without the rank's projection: when every effect of the
/// rank lies on stream `stream`, they are totally ordered by it, so the maximum prefix sum along
/// the stream is the answer; only the witness moment (the down-closure of the last event of the
/// earliest maximum prefix) needs the order across streams, and RankProjector::clock_of finds
/// that one clock. The same result as scan_chain on the projection, at the cost of one pass over
/// the stream and one search instead of the rank's projection.
/// `weight_of(event)`: the bytes the view counts at an event.
template <typename WeightOf>
void scan_stream(const Program& p, RankProjector& projector, int32_t rank, int32_t stream, WeightOf&& weight_of,
                 Moment& best) {
  int64_t sum = 0;
  int32_t last = -1;  // the event ending the best prefix
  for (OpId op : p.streams[stream].ops)
    for (int32_t e : {start_event(op), end_event(op)}) {
      const int64_t w = weight_of(e);
      if (w == 0) continue;
      sum += w;
      if (sum > best.bytes) {
        best.bytes = sum;
        last = e;
      }
    }
  if (last < 0) return;
  const std::vector<int32_t> clock = projector.clock_of(rank, last);
  const std::vector<int32_t>& streams = p.rank_streams[rank];
  for (size_t k = 0; k < streams.size(); ++k) {
    const std::vector<OpId>& ops = p.streams[streams[k]].ops;
    for (int32_t j = 0; j < clock[k]; ++j) best.events.push_back((j & 1) == 0 ? start_event(ops[j / 2]) : end_event(ops[j / 2]));
    if (clock[k] % 2 == 1) best.running.push_back(ops[clock[k] / 2]);
  }
  std::sort(best.events.begin(), best.events.end());
  std::sort(best.running.begin(), best.running.end());
}

/// Maximum-weight closure on one rank's projected order by minimum cut.
/// Picard (1976): source -> v with capacity w(v) for w(v) > 0, v -> sink with -w(v) for
/// w(v) < 0, an infinite edge from each event to each required predecessor; the maximum
/// closure weight is (sum of positive weights - min cut), and the closure is the set reachable
/// from the source in the residual graph (the smallest maximum closure). The graph holds the
/// rank's events below a positive one (only these can be in the smallest maximum closure),
/// with one edge per stream of the rank to the latest event there below (the projection's
/// clock), so its size is O(the rank's events x its streams).
class ClosureSolver {
 public:
  /// `weight`: per local index of `order`, the bytes counted at that event.
  ClosureSolver(const Program& p, const RankOrder& order, const std::vector<int64_t>& weight)
      : p_(p), order_(order), weight_(weight) {}

  Moment solve() {
    // The events below a positive one: on each stream, a prefix (the largest clock entry).
    const int width = order_.width();
    std::vector<int32_t> reach(width, 0);
    for (int32_t i = 0; i < order_.size(); ++i)
      if (weight_of(i) > 0)
        for (int k = 0; k < width; ++k) reach[k] = std::max(reach[k], order_.prefix(i, k));
    node_of_.assign(order_.size(), -1);
    nodes_.clear();
    for (int k = 0; k < width; ++k)
      for (int32_t j = 0; j < reach[k]; ++j) {
        const int32_t i = order_.local(order_.stream_event(k, j));
        node_of_[i] = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(i);
      }
    return min_cut();
  }

 private:
  using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, int32_t>;
  using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
  using Edge = boost::graph_traits<Graph>::edge_descriptor;

  int64_t weight_of(int32_t local) const { return weight_[local]; }

  /// Calls f(local index) for each required predecessor of local event i in the projection:
  /// on each stream, the latest event strictly below i.
  template <typename F>
  void for_each_pred(int32_t i, F&& f) const {
    const int32_t e = order_.events()[i];
    const int own = order_.stream_index(p_.ops[event_op(e)].stream);
    for (int k = 0; k < order_.width(); ++k) {
      const int32_t below = order_.prefix(i, k) - (k == own ? 2 : 1);
      if (below >= 0) f(order_.local(order_.stream_event(k, below)));
    }
  }

  Moment min_cut() {
    Moment m;
    if (nodes_.empty()) return m;
    const int32_t n = static_cast<int32_t>(nodes_.size());
    const int32_t source = n, sink = n + 1;

    int64_t positive = 0, magnitude = 0;
    for (int32_t i : nodes_) {
      const int64_t w = weight_of(i);
      if (w > 0) positive += w;
      magnitude += w < 0 ? -w : w;
    }
    const int64_t infinite = magnitude + 1;

    // Edges in pairs: edge 2k and its reverse 2k + 1 (capacity 0).
    std::vector<std::pair<int32_t, int32_t>> ends;
    std::vector<int64_t> cap_by_pair;
    auto add = [&](int32_t u, int32_t v, int64_t c) {
      ends.emplace_back(u, v);
      ends.emplace_back(v, u);
      cap_by_pair.push_back(c);
    };
    for (int32_t v = 0; v < n; ++v) {
      const int64_t w = weight_of(nodes_[v]);
      if (w > 0) add(source, v, w);
      if (w < 0) add(v, sink, -w);
      for_each_pred(nodes_[v], [&](int32_t pred) { add(v, node_of_[pred], infinite); });
    }
    const size_t num_edges = ends.size();
    std::vector<int32_t> ids(num_edges);
    for (size_t i = 0; i < num_edges; ++i) ids[i] = static_cast<int32_t>(i);
    Graph g(boost::edges_are_unsorted_multi_pass, ends.begin(), ends.end(), ids.begin(),
            static_cast<size_t>(n) + 2);
    std::vector<std::pair<int32_t, int32_t>>().swap(ends);
    std::vector<int32_t>().swap(ids);

    // Property maps indexed by the graph's edge index.
    std::vector<Edge> at(num_edges);  // original id -> edge
    for (auto e : boost::make_iterator_range(boost::edges(g))) at[g[e]] = e;
    std::vector<int64_t> capacity(num_edges), residual(num_edges);
    std::vector<Edge> reverse(num_edges);
    for (size_t id = 0; id < num_edges; ++id) {
      const size_t idx = at[id].idx;
      capacity[idx] = id % 2 == 0 ? cap_by_pair[id / 2] : 0;
      reverse[idx] = at[id ^ 1];
    }
    std::vector<Edge>().swap(at);
    std::vector<int64_t>().swap(cap_by_pair);

    const auto eidx = boost::get(boost::edge_index, g);
    const auto vidx = boost::get(boost::vertex_index, g);
    auto cap_map = boost::make_iterator_property_map(capacity.begin(), eidx);
    auto res_map = boost::make_iterator_property_map(residual.begin(), eidx);
    auto rev_map = boost::make_iterator_property_map(reverse.begin(), eidx);
    const int64_t flow = run_max_flow(g, cap_map, res_map, rev_map, vidx, source, sink);
    m.bytes = positive - flow;

    // The closure: reachable from the source through edges with residual capacity.
    std::vector<uint8_t> reached(static_cast<size_t>(n) + 2, 0);
    std::vector<int32_t> stack{source};
    reached[source] = 1;
    while (!stack.empty()) {
      const Vertex u = stack.back();
      stack.pop_back();
      for (auto e : boost::make_iterator_range(boost::out_edges(u, g))) {
        const Vertex v = boost::target(e, g);
        if (!reached[v] && residual[e.idx] > 0) {
          reached[v] = 1;
          stack.push_back(static_cast<int32_t>(v));
        }
      }
    }
    assert(!reached[sink]);
    int64_t check = 0;
    for (int32_t v = 0; v < n; ++v)
      if (reached[v]) {
        m.events.push_back(order_.events()[nodes_[v]]);
        check += weight_of(nodes_[v]);
      }
    assert(check == m.bytes);
    (void)check;
    for (int32_t e : m.events) {
      if (is_end_event(e)) continue;
      const int32_t end = node_of_[order_.local(end_event(event_op(e)))];
      if (end < 0 || !reached[end]) m.running.push_back(event_op(e));
    }
    std::sort(m.events.begin(), m.events.end());
    std::sort(m.running.begin(), m.running.end());
    return m;
  }

  /// Boykov-Kolmogorov max flow (measured faster than push-relabel on a 10^5-op 1F1B program
  /// with 8 ranks: 0.38 s against 0.45 s, and 77 MiB against 88 MiB peak resident set).
  template <class CapMap, class ResMap, class RevMap, class IndexMap>
  static int64_t run_max_flow(Graph& g, CapMap cap, ResMap res, RevMap rev, IndexMap vidx, Vertex s, Vertex t) {
    const size_t nv = boost::num_vertices(g);
    std::vector<Edge> pred(nv);
    std::vector<boost::default_color_type> color(nv);
    std::vector<int64_t> distance(nv);
    return boost::boykov_kolmogorov_max_flow(g, cap, res, rev, boost::make_iterator_property_map(pred.begin(), vidx),
                                             boost::make_iterator_property_map(color.begin(), vidx),
                                             boost::make_iterator_property_map(distance.begin(), vidx), vidx, s, t);
  }

  const Program& p_;
  const RankOrder& order_;
  const std::vector<int64_t>& weight_;
  std::vector<int32_t> nodes_;    ///< graph vertex -> local index
  std::vector<int32_t> node_of_;  ///< local index -> graph vertex, or -1
};

}  // namespace

std::vector<WorstCaseMemory> worst_case_memory_views(const Program& program, const std::vector<MemoryView>& views,
                                                     bool force_min_cut, const std::vector<int32_t>* only_ranks) {
  const int32_t ranks = program.num_ranks;
  auto counted = [&](const MemoryView& v, int32_t buffer) {
    return v.buffers.empty() || (buffer >= 0 && static_cast<size_t>(buffer) < v.buffers.size() && v.buffers[buffer]);
  };
  // The bytes a view counts at an event, from its op's effects: computed per rank where needed,
  // not stored for every event of the program (16 bytes an op at the peak of verify).
  auto event_weight = [&](const MemoryView& view, int32_t e) {
    const OpId op = event_op(e);
    int64_t w = 0;
    for (const MemEffect* m = program.mem_begin(op); m != program.mem_end(op); ++m)
      if (m->at_end == is_end_event(e) && counted(view, m->buffer)) w += m->bytes;
    return w;
  };
  // Per view and rank: the one stream holding its effects (-1 none, -2 several).
  std::vector<std::vector<int32_t>> effect_stream(views.size(), std::vector<int32_t>(ranks, -1));
  for (size_t v = 0; v < views.size(); ++v)
    for (OpId op = 0; op < static_cast<OpId>(program.ops.size()); ++op) {
      const Op& o = program.ops[op];
      bool any = false;
      for (const MemEffect* m = program.mem_begin(op); m != program.mem_end(op); ++m)
        any |= m->bytes != 0 && counted(views[v], m->buffer);
      if (!any || o.rank < 0 || o.rank >= ranks) continue;
      int32_t& s = effect_stream[v][o.rank];
      s = s == -1 ? o.stream : (s == o.stream ? s : -2);
    }

  std::vector<WorstCaseMemory> out(views.size());
  for (auto& w : out) {
    w.bytes_per_rank.assign(ranks, 0);
    w.live_buffers.assign(ranks, {});
    w.running_ops.assign(ranks, {});
    w.used_min_cut.assign(ranks, 0);
    w.ran_min_cut.assign(ranks, 0);
  }
  std::unique_ptr<HappensBefore> hb;
  std::unique_ptr<RankProjector> projector;
  auto projector_of_program = [&]() -> RankProjector& {  // built once, on the first rank with effects
    if (!hb) hb = std::make_unique<HappensBefore>(program);
    if (!projector) projector = std::make_unique<RankProjector>(*hb);
    return *projector;
  };
  std::vector<int64_t> net(program.buffers.size(), 0);
  std::vector<int32_t> chain;
  std::vector<int64_t> local_weight;  // per local index of the rank's order
  for (int32_t r = 0; r < ranks; ++r) {
    if (only_ranks && std::find(only_ranks->begin(), only_ranks->end(), r) == only_ranks->end()) continue;
    // The rank's projected order, built at most once and shared by the views.
    std::unique_ptr<RankOrder> order;
    for (size_t v = 0; v < views.size(); ++v) {
      Moment m;
      const int32_t stream = effect_stream[v][r];
      if (stream >= 0 && !force_min_cut) {
        // One stream holds every effect: the prefix scan along it, no projection.
        scan_stream(program, projector_of_program(), r, stream, [&](int32_t e) { return event_weight(views[v], e); }, m);
      } else if (stream != -1) {
        if (!order) order = std::make_unique<RankOrder>(projector_of_program().project(r));
        chain.clear();
        local_weight.resize(order->size());
        for (int32_t i = 0; i < order->size(); ++i) {
          local_weight[i] = event_weight(views[v], order->events()[i]);
          if (local_weight[i] != 0) chain.push_back(i);
        }
        if (force_min_cut || !scan_chain(program, *order, chain, local_weight, m)) {
          m = ClosureSolver(program, *order, local_weight).solve();
          out[v].ran_min_cut[r] = 1;
        }
        out[v].used_min_cut[r] = force_min_cut || stream == -2;
      }
      // else no effects: the worst case is the static bytes, at the empty moment.
      const int64_t fixed = views[v].with_static && r < static_cast<int32_t>(program.static_bytes_per_rank.size())
                                ? program.static_bytes_per_rank[r] : 0;
      out[v].bytes_per_rank[r] = fixed + m.bytes;
      std::vector<int32_t> live = live_buffers_of(program, r, m.events, net);
      std::erase_if(live, [&](int32_t b) { return !counted(views[v], b); });
      out[v].live_buffers[r] = std::move(live);
      out[v].running_ops[r] = std::move(m.running);
    }
  }
  return out;
}

WorstCaseMemory worst_case_memory(const Program& program, bool force_min_cut) {
  return std::move(worst_case_memory_views(program, {MemoryView{}}, force_min_cut).front());
}

}  // namespace sc
