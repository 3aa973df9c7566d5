// `schedcheck numerics`: error, bias and failure modes of one reducing collective's arithmetic.
#include <cctype>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "cli/common.h"
#include "numerics/analysis.h"
#include "report/numerics_report.h"
#include "solver/numerics_smt.h"

namespace sc::cli {

namespace {

constexpr int kExitSolverInconclusive = 5;  // DESIGN.md: solver unknown, time or resource limit

struct NumericsArgs {
  std::string dtype = "bf16";
  std::string op = "sum";
  int ranks = 8;
  std::string algorithm = "ring";
  std::string collective = "all_reduce";
  std::optional<std::string> accum;
  std::optional<std::string> input_dtype;
  int channels = 1;
  double premul_factor = 1.0;
  double pre_divide = 1.0;
  double post_divide = 1.0;
  std::optional<double> max_relative_error;
  std::optional<double> max_bias;
  std::optional<double> min_gradient;
  bool deterministic = false;
  std::optional<int64_t> samples;  ///< --samples; unset: kDefaultSamples, fewer at large N
  uint64_t seed = numerics::AnalysisOptions{}.seed;
  bool no_fixes = false;
  bool smt = false;
  double smt_timeout_s = 30;
  int smt_window = 16;
  std::string format = "text";
};

/// Elements drawn per bias distribution when --samples is not given.
constexpr int64_t kDefaultSamples = 1024;
/// Most ranks x samples one run reduces per distribution (2^24). The emulation is O(N) per
/// element: about 0.2 us per rank and element, the usual fixes included, on one busy core of this
/// project's development machine (measured: 8,192 ranks x 1,024 samples in 4.7 s), so this bounds a
/// run to about 10 s.
constexpr int64_t kMaxNumericsWork = int64_t{1} << 24;
/// Fewest samples drawn when --samples is lowered for a large N.
constexpr int64_t kMinAutoSamples = 16;

/// The samples per distribution: --samples, or kDefaultSamples lowered to fit kMaxNumericsWork
/// (not below kMinAutoSamples; at the 2^20-rank limit that is exactly 2^24).
int64_t samples_for(const NumericsArgs& a) {
  if (a.samples) return *a.samples;
  return std::max(kMinAutoSamples, std::min(kDefaultSamples, kMaxNumericsWork / std::max(1, a.ranks)));
}

// "bf16, fp16" style list for an error message.
const char* kDtypes = "fp32, bf16, fp16, fp8_e4m3, fp8_e5m2";

std::string suggestion(const std::string& given, std::initializer_list<const char*> names) {
  // The name with the longest common prefix, when it shares at least two characters.
  std::string best;
  size_t best_len = 1;
  for (const char* n : names) {
    size_t k = 0;
    while (k < given.size() && n[k] && std::tolower(static_cast<unsigned char>(given[k])) == n[k]) ++k;
    if (k > best_len) {
      best_len = k;
      best = n;
    }
  }
  return best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
}

// Builds the configuration from the options; problems go to `errors` (one line each).
numerics::ReductionConfig make_config(const NumericsArgs& a, std::vector<std::string>& errors) {
  numerics::ReductionConfig c;
  auto dtype = [&](const std::string& option, const std::string& text) -> std::optional<numerics::DType> {
    auto t = numerics::parse_dtype(text);
    if (!t)
      errors.push_back(fmt::format("{}: unknown dtype '{}'{} (expected {})", option, text,
                                   suggestion(text, {"fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"}), kDtypes));
    return t;
  };
  if (auto t = dtype("--dtype", a.dtype)) c.dtype = *t;
  if (a.input_dtype)
    if (auto t = dtype("--input-dtype", *a.input_dtype)) c.input_dtype = *t;
  if (a.accum)
    if (auto t = dtype("--accum", *a.accum)) c.accum_dtype = *t;
  if (auto op = numerics::parse_op(a.op))
    c.op = *op;
  else
    errors.push_back(fmt::format("--op: unknown reduction op '{}'{} (expected sum, avg, premul_sum, max)", a.op,
                                 suggestion(a.op, {"sum", "avg", "premul_sum", "max"})));
  if (auto alg = numerics::parse_algorithm(a.algorithm))
    c.algorithm = *alg;
  else
    errors.push_back(fmt::format("--algorithm: unknown algorithm '{}'{} (expected ring, tree, nvls, auto)", a.algorithm,
                                 suggestion(a.algorithm, {"ring", "tree", "nvls", "auto"})));
  if (auto k = numerics::parse_collective(a.collective))
    c.collective = *k;
  else
    errors.push_back(fmt::format("--collective: unknown collective '{}'{} (expected all_reduce, reduce_scatter, reduce)",
                                 a.collective, suggestion(a.collective, {"all_reduce", "reduce_scatter", "reduce"})));
  c.ranks = a.ranks;
  c.channels = a.channels;
  c.premul_factor = a.premul_factor;
  c.pre_divide = a.pre_divide;
  c.post_divide = a.post_divide;
  if (errors.empty()) {
    std::string problem = numerics::validate(c);
    if (!problem.empty()) errors.push_back(problem);
  }
  if (a.ranks > (1 << 20)) errors.push_back(fmt::format("ranks must be at most {} (got {})", 1 << 20, a.ranks));
  for (auto [name, v] : {std::pair{"--max-relative-error", a.max_relative_error}, std::pair{"--max-bias", a.max_bias},
                         std::pair{"--min-gradient", a.min_gradient}})
    if (v && !(std::isfinite(*v) && *v >= 0)) errors.push_back(fmt::format("{} must be a finite number >= 0 (got {})", name, *v));
  // Z3's timeout parameter is an unsigned count of milliseconds: at most about 4.29e6 s.
  if (!(std::isfinite(a.smt_timeout_s) && a.smt_timeout_s > 0 && a.smt_timeout_s <= 4e6))
    errors.push_back(fmt::format("--smt-timeout must be a number of seconds in (0, 4000000] (got {})", a.smt_timeout_s));
  if (a.samples && (*a.samples < 1 || *a.samples > 10'000'000))
    errors.push_back(fmt::format("--samples must be between 1 and 10000000 (got {})", *a.samples));
  else if (a.samples && a.ranks > 0 && *a.samples * a.ranks > kMaxNumericsWork)
    errors.push_back(fmt::format("--ranks {} x --samples {} is {:.3g} element reductions per distribution, more than "
                                 "the {} (about 30 s) one run takes; give fewer --samples (at most {}), or leave "
                                 "--samples out to have it chosen",
                                 a.ranks, *a.samples, static_cast<double>(*a.samples * a.ranks), kMaxNumericsWork,
                                 std::max<int64_t>(1, kMaxNumericsWork / a.ranks)));
  return c;
}

int run_numerics(const NumericsArgs& a) {
  std::vector<std::string> errors;
  numerics::ReductionConfig c = make_config(a, errors);
  if (!errors.empty()) {
    for (const auto& e : errors) std::cerr << "schedcheck: error: " << e << "\n";
    std::cerr << "schedcheck: the collective's configuration has errors; nothing was analysed\n";
    return kExitSpec;
  }
  NumericsReport r;
  numerics::AnalysisOptions opt;
  opt.samples = samples_for(a);
  if (!a.samples && opt.samples < kDefaultSamples)
    std::cerr << fmt::format("schedcheck: note: {} samples per distribution instead of {}, so that ranks x samples "
                             "stays within {} (about 30 s); --samples chooses\n",
                             opt.samples, kDefaultSamples, kMaxNumericsWork);
  opt.seed = a.seed;
  opt.fixes = !a.no_fixes;
  auto start = std::chrono::steady_clock::now();
  r.analysis = numerics::analyze(c, opt);
  r.analysis_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (a.max_relative_error || a.max_bias || a.min_gradient) r.tolerances.defaults = false;
  if (a.max_relative_error) r.tolerances.max_relative_error = *a.max_relative_error;
  if (a.max_bias) r.tolerances.max_bias = *a.max_bias;
  if (a.min_gradient) r.tolerances.min_gradient = *a.min_gradient;
  r.tolerances.deterministic = a.deterministic;
  r.findings = numerics::numerics_findings(r.analysis, r.tolerances);
  if (a.smt) {
    NumericsSmtOptions so;
    so.timeout_ms = static_cast<unsigned>(std::max(1.0, a.smt_timeout_s * 1000));
    so.window_binades = a.smt_window;
    r.proof = smt_worst_case(c, so);
  }
  std::string verdict = numerics_verdict(r);
  r.exit_code = verdict == "violated" ? kExitNumerics : verdict == "inconclusive" ? kExitSolverInconclusive : 0;
  std::cout << (a.format == "json" ? numerics_json(r) : numerics_text(r));
  return r.exit_code;
}

}  // namespace

Command add_numerics(CLI::App& parent) {
  auto a = std::make_shared<NumericsArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "numerics",
      "Error, bias and failure modes of one reducing collective's arithmetic, emulated bit-exactly in NCCL's order,\n"
      "with the usual fixes side by side (specs/numerics.md explains every figure).\n"
      "  schedcheck numerics --dtype bf16 --op avg --ranks 1024 --algorithm ring\n"
      "  schedcheck numerics --dtype fp16 --op sum --ranks 64 --pre-divide 8 --post-divide 8 --format json\n"
      "  schedcheck numerics --dtype bf16 --ranks 8 --smt          (Z3's exact worst case for small N)\n"
      "Exit codes: 0 within tolerance; 17 a numerics finding; 5 the Z3 search did not finish; 2 a bad value;\n"
      "1 usage.");
  cmd->add_option("--dtype", a->dtype, "element type of the collective: fp32, bf16, fp16, fp8_e4m3, fp8_e5m2")
      ->capture_default_str();
  cmd->add_option("--op", a->op, "sum, avg (NCCL: pre-multiply by dtype(1/N)), premul_sum, max")->capture_default_str();
  cmd->add_option("--ranks", a->ranks, "ranks N in the communicator")->capture_default_str();
  cmd->add_option("--algorithm", a->algorithm, "ring, tree, nvls (switch reduction), or auto (the worst of the three)")
      ->capture_default_str();
  cmd->add_option("--collective", a->collective, "all_reduce, reduce_scatter or reduce (changes bytes only)")
      ->capture_default_str();
  cmd->add_option("--accum", a->accum, "accumulation type of nvls (default fp32)");
  cmd->add_option("--input-dtype", a->input_dtype, "type of the gradients before the cast to --dtype (default: --dtype)");
  cmd->add_option("--channels", a->channels, "NCCL channels")->capture_default_str();
  cmd->add_option("--premul-factor", a->premul_factor, "premul_sum's scalar")->capture_default_str();
  cmd->add_option("--pre-divide", a->pre_divide, "framework's division of every input before the collective")
      ->capture_default_str();
  cmd->add_option("--post-divide", a->post_divide, "framework's division of the result after it")->capture_default_str();
  cmd->add_option("--max-relative-error", a->max_relative_error,
                  "tolerance on the worst relative error (default 0.25)");
  cmd->add_option("--max-bias", a->max_bias, "tolerance on the systematic bias and on avg's scale error (default 0.001)");
  cmd->add_option("--min-gradient", a->min_gradient, "smallest gradient whose underflow is a finding (default 1e-12)");
  cmd->add_flag("--deterministic", a->deterministic,
                "ask for bitwise-reproducible results: a result that depends on the fold order NCCL may pick (ring "
                "start, channel count, algorithm) is a finding naming the two orders (spec key: "
                "numerics.deterministic)");
  cmd->add_option("--samples", a->samples,
                  fmt::format("elements drawn per bias distribution (default {}; fewer, down to {}, when --ranks x {} "
                              "passes {}). The emulation costs about 0.2 us per rank per element, three "
                              "distributions and the fixes together: --ranks 8192 takes about 5 s",
                              kDefaultSamples, kMinAutoSamples, kDefaultSamples, kMaxNumericsWork));
  cmd->add_option("--seed", a->seed, "base seed of the distributions")->capture_default_str();
  cmd->add_flag("--no-fixes", a->no_fixes, "skip the figures under the usual fixes");
  cmd->add_flag("--smt", a->smt, "also search the exact worst case with Z3 (sum, ring or tree, bf16 or fp16, N <= 16)");
  cmd->add_option("--smt-timeout", a->smt_timeout_s, "seconds for the Z3 search")->capture_default_str();
  cmd->add_option("--smt-window", a->smt_window, "binades below the largest input that the Z3 search covers")
      ->capture_default_str();
  cmd->add_option("--format", a->format, "text (for people) or json")->check(one_of({"text", "json"}));
  return {cmd, [a] { return run_numerics(*a); }};
}

}  // namespace sc::cli
