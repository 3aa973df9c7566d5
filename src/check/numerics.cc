// Numerics pass: the rounding error and bias of every reducing collective's arithmetic.
#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "check/passes.h"
#include "numerics/analysis.h"

namespace sc {

NumericsPassResult check_numerics(const Program& p) {
  namespace nm = numerics;
  // One entry per distinct (arithmetic, dtype, kind, communicator size): every member of every
  // instance of a collective shares it, so a million collectives are a handful of analyses.
  using Key = std::tuple<int32_t, std::string, int, size_t>;
  std::map<Key, std::vector<size_t>> seen;  // its entries of `located` (two for a bare "fp8")
  std::vector<nm::LocatedReduction> located;
  std::vector<std::vector<OpId>> located_ops;  // per entry of `located`: every op with its key
  std::vector<std::string> problems;
  for (OpId id = 0; id < static_cast<OpId>(p.ops.size()); ++id) {
    const Op& o = p.ops[id];
    if (o.kind != OpKind::kCollective || o.arith() < 0 || o.comm() < 0) continue;
    if (o.collective != CollectiveKind::kReduceScatter && o.collective != CollectiveKind::kAllReduce) continue;
    const size_t n = static_cast<size_t>(p.comms[o.comm()].group_size());
    if (n < 2) continue;
    Key key{o.arith(), o.dtype.c_str(), static_cast<int>(o.collective), n};
    if (auto it = seen.find(key); it != seen.end()) {
      for (size_t e : it->second) located_ops[e].push_back(id);
      continue;
    }
    std::vector<size_t>& entries = seen[key];
    const CollectiveArithmetic& a = p.arithmetic[o.arith()];
    // A bare "fp8" (the specs' one-byte type) names no format: both are analysed, and a
    // finding names the one it is about.
    std::vector<nm::DType> dtypes;
    if (std::string(o.dtype.c_str()) == "fp8") dtypes = {nm::DType::kFp8E4M3, nm::DType::kFp8E5M2};
    else if (auto d = nm::parse_dtype(o.dtype.c_str())) dtypes = {*d};
    auto op = nm::parse_op(a.op);
    auto alg = nm::parse_algorithm(a.algorithm);
    if (!op || !alg) continue;  // every front-end writes one of NCCL's names
    for (nm::DType dtype : dtypes) {
      nm::ReductionConfig c;
      c.dtype = dtype;
      c.op = *op;
      c.algorithm = *alg;
      c.collective = o.collective == CollectiveKind::kReduceScatter ? nm::CollectiveKind::kReduceScatter
                                                                   : nm::CollectiveKind::kAllReduce;
      c.ranks = static_cast<int>(n);
      c.channels = a.channels;
      c.premul_factor = a.premul_factor;
      c.pre_divide = a.pre_divide;
      c.post_divide = a.post_divide;
      if (!nm::validate(c).empty()) continue;
      entries.push_back(located.size());
      located.push_back({c, a.where.valid() ? a.where : o.loc, p.label(id)});
      located_ops.push_back({id});
    }
  }
  if (located.empty()) return {};
  nm::Tolerances tol;
  if (p.max_relative_error) tol.max_relative_error = *p.max_relative_error, tol.defaults = false;
  if (p.max_bias) tol.max_bias = *p.max_bias, tol.defaults = false;
  tol.deterministic = p.deterministic;
  nm::AnalysisOptions opt;
  opt.samples = 256;
  opt.fixes = true;  // computed only for configurations with findings
  nm::ReductionCheck r = nm::check_reductions(located, tol, opt);
  NumericsPassResult result;
  std::vector<Finding>& out = result.findings;
  for (size_t i = 0; i < r.analyses.size(); ++i) {
    if (r.analyses[i].fixes.empty()) continue;  // fixes are computed only where there is a finding
    NumericsFixes fx{std::move(r.analyses[i]), {}};
    for (size_t m : r.members[i]) fx.ops.insert(fx.ops.end(), located_ops[m].begin(), located_ops[m].end());
    std::sort(fx.ops.begin(), fx.ops.end());
    result.fixes.push_back(std::move(fx));
  }
  for (const nm::NumericsFinding& nf : r.findings) {
    Finding f;
    f.kind = FindingKind::kNumerics;
    f.message = nf.message;
    f.ops = nf.ops;
    f.locations = nf.locations;
    while (f.locations.size() < f.ops.size()) f.locations.push_back(SourceLoc{});
    std::string figures;
    for (const auto& [name, value] : nf.data) figures += fmt::format("{}{} {:.4g}", figures.empty() ? "" : ", ", name, value);
    if (!figures.empty()) f.details.push_back(figures);
    if (!nf.witness.empty()) f.details.push_back("witness: " + nf.witness);
    f.details.push_back(tol.defaults ? fmt::format("default tolerances: max_relative_error {}, max_bias {} (state "
                                                   "numerics: {{max_relative_error, max_bias}} in the spec)",
                                                   tol.max_relative_error, tol.max_bias)
                                     : fmt::format("tolerances: max_relative_error {}, max_bias {}",
                                                   tol.max_relative_error, tol.max_bias));
    out.push_back(std::move(f));
  }
  return result;
}

}  // namespace sc
