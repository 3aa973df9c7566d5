#include "config/megatron_layers.h"

#include <algorithm>

#include <fmt/format.h>

namespace sc::config {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Reads the decimal number at `s[*i]` (at least one digit there), capped at `cap` + 1.
int64_t read_count(const std::string& s, size_t* i, int64_t cap) {
  int64_t n = 0;
  for (; *i < s.size() && is_digit(s[*i]); ++*i) n = std::min(cap + 1, n * 10 + (s[*i] - '0'));
  return n;
}

/// Appends `piece` `n` times to `out`; false when `out` would grow past the cap.
bool repeat(std::string& out, const std::string& piece, int64_t n) {
  if (n > 0 && piece.size() > 0 &&
      (out.size() > kMaxMegatronLayoutChars || static_cast<uint64_t>(n) > (kMaxMegatronLayoutChars - out.size()) / piece.size()))
    return false;
  for (int64_t k = 0; k < n; ++k) out += piece;
  return true;
}

/// Python's `a % b` (the sign of b), as Megatron's checks compute it.
int64_t py_mod(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

/// Python's `a // b`.
int64_t py_div(int64_t a, int64_t b) { return (a - py_mod(a, b)) / b; }

std::string py_optional(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "None"; }
const char* py_bool(bool b) { return b ? "True" : "False"; }

/// Python's str() of the LayerType a layout character stands for.
std::string layer_type(char c) {
  switch (c) {
    case 'E': return "LayerType.embedding";
    case 'L': return "LayerType.loss";
    case 't': return "LayerType.decoder";
    default: return "LayerType.mtp";
  }
}

/// `s` as a message quotes it: whole up to 200 characters (Megatron prints it whole), else its
/// first 160 and last 20 with the count between, so that `(x)*1000000` gives a line, not 2 MB.
std::string shown_layout(const std::string& s) {
  constexpr size_t kWhole = 200, kHead = 160, kTail = 20;
  if (s.size() <= kWhole) return s;
  return fmt::format("{}... ({} characters) ...{}", s.substr(0, kHead), s.size() - kHead - kTail,
                     s.substr(s.size() - kTail));
}

}  // namespace

std::optional<std::vector<std::string>> parse_megatron_layout(const std::string& text, std::string* error) {
  // Cosmetic commas go first, then re.sub(r'\(([^)]+)\)\*(\d+)', ...) and
  // re.sub(r'(.)\*(\d+)', ...), each one left-to-right pass over its input.
  std::string s;
  for (char c : text)
    if (c != ',') s += c;
  const auto too_long = [&] {
    *error = fmt::format("the layout unrolls to more than {} characters", kMaxMegatronLayoutChars);
    return std::nullopt;
  };
  std::string groups;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '(') {
      const size_t close = s.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && close + 2 < s.size() && s[close + 1] == '*' &&
          is_digit(s[close + 2])) {
        size_t k = close + 2;
        const int64_t n = read_count(s, &k, static_cast<int64_t>(kMaxMegatronLayoutChars));
        if (!repeat(groups, s.substr(i + 1, close - i - 1), n)) return too_long();
        i = k;
        continue;
      }
    }
    groups += s[i++];
  }
  std::string flat;
  for (size_t i = 0; i < groups.size();) {
    if (i + 2 < groups.size() && groups[i + 1] == '*' && is_digit(groups[i + 2]) && groups[i] != '\n') {
      size_t k = i + 2;
      const int64_t n = read_count(groups, &k, static_cast<int64_t>(kMaxMegatronLayoutChars));
      if (!repeat(flat, std::string(1, groups[i]), n)) return too_long();
      i = k;
      continue;
    }
    flat += groups[i++];
    if (flat.size() > kMaxMegatronLayoutChars) return too_long();
  }
  std::vector<std::string> stages(1);
  for (char c : flat) {
    if (c == '|') {
      stages.emplace_back();
      continue;
    }
    stages.back() += c;
  }
  // Checked stage by stage, as Megatron does: the first bad character of the first bad stage.
  for (const std::string& stage : stages) {
    for (char c : stage)
      if (c != 'E' && c != 'L' && c != 't' && c != 'm') {
        *error = fmt::format("Invalid layer character: {} (stage='{}', layout_str='{}'), known layer characters: "
                             "['E', 'L', 't', 'm']",
                             c, shown_layout(stage), shown_layout(flat));
        return std::nullopt;
      }
  }
  return stages;
}

MegatronSplit megatron_stage_layers(const MegatronSplitFlags& f) {
  MegatronSplit out;
  const auto fail = [&](MegatronSplitFlag at, std::string message) {
    out.stage_layers.clear();
    out.error = std::move(message);
    out.at = at;
    return out;
  };
  const int64_t pp = std::max<int64_t>(1, f.pp);
  const MegatronSplitFlag uneven_at = f.first ? MegatronSplitFlag::kFirst : MegatronSplitFlag::kLast;
  int64_t vpp = std::max<int64_t>(1, f.vpp);
  std::vector<std::string> layout;
  // validate_args (arguments.py): the layout's stages give the virtual stages.
  if (f.layout) {
    std::string why;
    auto stages = parse_megatron_layout(*f.layout, &why);
    if (!stages) return fail(MegatronSplitFlag::kLayout, why);
    layout = std::move(*stages);
    const int64_t n = static_cast<int64_t>(layout.size());
    if (n % pp != 0)
      return fail(MegatronSplitFlag::kLayout,
                  fmt::format("The length of pipeline_model_parallel_layout must be divisible by "
                              "pipeline_model_parallel_size (num_stages={}, args.pipeline_model_parallel_size={})",
                              n, pp));
    vpp = n / pp;
  } else if (f.vpp_from_layers_per_stage && (f.first || f.last)) {
    return fail(uneven_at, "please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel "
                           "degree when enable uneven pipeline parallelism");
  }
  out.vpp = vpp;
  // TransformerConfig.__post_init__ (transformer_config.py), its messages verbatim.
  if ((f.first || f.last) && (f.embedding || f.loss))
    return fail(uneven_at, "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot beset at "
                           "the same time with account_for_embedding_in_pipeline_splitand "
                           "account_for_loss_in_pipeline_split");
  std::vector<int64_t> layers(static_cast<size_t>(pp * vpp), 0);
  const auto stage = [&](int64_t r, int64_t v) -> int64_t& { return layers[static_cast<size_t>(v * pp + r)]; };
  if (f.layout) {
    if (f.first || f.last || f.embedding || f.loss)
      return fail(MegatronSplitFlag::kLayout,
                  fmt::format("pipeline_model_parallel_layout cannot be set with other pipeline layout arguments. "
                              "self.num_layers_in_first_pipeline_stage={}, self.num_layers_in_last_pipeline_stage={}, "
                              "self.account_for_embedding_in_pipeline_split={}, "
                              "self.account_for_loss_in_pipeline_split={}.",
                              py_optional(f.first), py_optional(f.last), py_bool(f.embedding), py_bool(f.loss)));
    // validate_layer_layout: the layers in layer order are the stages in list order.
    std::string flat;
    for (const std::string& s : layout) flat += s;
    if (flat.empty()) return fail(MegatronSplitFlag::kLayout, "The first layer must be embedding, but the layout holds no layer");
    if (flat.front() != 'E')
      return fail(MegatronSplitFlag::kLayout, "The first layer must be embedding, but got " + layer_type(flat.front()));
    if (flat.back() != 'L')
      return fail(MegatronSplitFlag::kLayout, "The last layer must be loss, but got " + layer_type(flat.back()));
    const auto count = [](const std::string& s, char c) { return static_cast<int64_t>(std::count(s.begin(), s.end(), c)); };
    if (count(flat, 'E') != 1) return fail(MegatronSplitFlag::kLayout, "Embedding must be specified exactly once");
    if (count(flat, 'L') != 1) return fail(MegatronSplitFlag::kLayout, "Loss must be specified exactly once");
    if (count(flat, 't') != f.num_layers)
      return fail(MegatronSplitFlag::kLayout, fmt::format("Number of decoder layers {}must match num_layers {}",
                                                          count(flat, 't'), f.num_layers));
    if (count(flat, 'm') != f.mtp_layers)
      return fail(MegatronSplitFlag::kLayout, "Number of mtp layers in layout must match mtp_num_layers");
    if (const size_t m = flat.find('m'); m != std::string::npos && flat.find('t', m) != std::string::npos)
      return fail(MegatronSplitFlag::kLayout, "decoder layers must be placed before MTP layers");
    for (int64_t r = 0; r < pp; ++r) {
      for (int64_t v = 0; v + 1 < vpp; ++v)
        if (count(layout[v * pp + r], 'm') > 0)
          // Megatron's message ends here: the rest of its f-string lies outside the assert.
          return fail(MegatronSplitFlag::kLayout, "Currently we restrict that the MTP should be always in the last");
      const std::string& last = layout[(vpp - 1) * pp + r];
      if (count(last, 'm') > 0 && count(last, 'm') != f.mtp_layers)
        return fail(MegatronSplitFlag::kLayout, "All of the MTP layers must be in the same one virtual pipeline stage");
    }
    // get_num_layers_to_build: the decoder layers of the stage's entry.
    for (int64_t s = 0; s < pp * vpp; ++s) layers[s] = count(layout[s], 't');
    out.stage_layers = std::move(layers);
    return out;
  }
  if (f.first || f.last) {
    int64_t rest = f.num_layers, middle = pp;
    for (const auto& [given, at, which] : {std::tuple{f.first, MegatronSplitFlag::kFirst, "first"},
                                           std::tuple{f.last, MegatronSplitFlag::kLast, "last"}}) {
      if (!given) continue;
      if (*given <= 0) return fail(at, fmt::format("num_layers_in_{}_pipeline_stage must be larger than 0", which));
      if (vpp > 1 && *given % vpp != 0)
        return fail(at, fmt::format("number of layers at {} stage: {}must be divisible by virtual pipelineparallel "
                                    "degree {}",
                                    which, *given, vpp));
      rest -= *given;
      middle -= 1;
    }
    if ((rest != 0) != (middle != 0))
      return fail(uneven_at, fmt::format("Mismatch: {} middle layers remaining but {} middle PP stages available.",
                                         rest, middle));
    if (middle != 0 && py_mod(rest, middle) != 0)
      return fail(uneven_at, fmt::format("number of layers at middle stage: {} must be divisible bythe middle pipeline "
                                         "model parallel size {}",
                                         rest, middle));
    if (middle != 0 && vpp > 1 && py_mod(py_div(rest, middle), vpp) != 0)
      return fail(uneven_at, fmt::format("number of layers on each middle pipeline rank:{} must be divisible by "
                                         "virtualpipeline parallel degree {}",
                                         py_div(rest, middle), vpp));
    // Not a check of Megatron's: first + last over --num-layers leaves the middle ranks a
    // negative count, and the model it builds has fewer layers than --num-layers says.
    if (rest < 0)
      return fail(uneven_at, fmt::format("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers "
                                         "give {} layers more than --num-layers ({})",
                                         -rest, f.num_layers));
    // get_num_layers_to_build: the middle ranks share the rest, the first and last rank hold
    // what their flags say, and each rank's count is split evenly over its virtual stages.
    for (int64_t r = 0; r < pp; ++r) {
      int64_t per_rank = middle > 0 ? rest / middle : 0;
      if (r == 0 && f.first) per_rank = *f.first;
      if (r == pp - 1 && f.last) per_rank = *f.last;
      for (int64_t v = 0; v < vpp; ++v) stage(r, v) = per_rank / vpp;
    }
    out.stage_layers = std::move(layers);
    return out;
  }
  // Even split, with the embedding and the loss counted as a layer each where asked.
  const int64_t n = f.num_layers + (f.embedding ? 1 : 0) + (f.loss ? 1 : 0);
  const MegatronSplitFlag account_at = f.embedding ? MegatronSplitFlag::kEmbedding : MegatronSplitFlag::kLoss;
  if (vpp == 1 && n % pp != 0)
    return fail(account_at, fmt::format("number of middle layers: {} must be divisible by middle "
                                        "pipeline_model_parallel_size {}",
                                        n, pp));
  if (vpp > 1 && n % pp != 0)
    return fail(account_at, fmt::format("num_layers: {} after enableaccount_for_embedding_in_pipeline_split or "
                                        "account_for_loss_in_pipeline_split must be divisibleby "
                                        "pipeline_model_parallel_size {}",
                                        n, pp));
  if (vpp > 1 && (n / pp) % vpp != 0)
    return fail(account_at, fmt::format("number of layers on each pipeline rank: {}(after enable "
                                        "account_for_embedding_in_pipeline_split or "
                                        "account_for_loss_in_pipeline_split) must be divisible "
                                        "byvirtual_pipeline_model_parallel_size{}",
                                        n / pp, vpp));
  for (int64_t r = 0; r < pp; ++r)
    for (int64_t v = 0; v < vpp; ++v) stage(r, v) = n / pp / vpp;
  // The embedding (loss) is no transformer layer: the first (last) virtual stage builds one
  // layer fewer (transformer_block.py).
  if (f.embedding && --stage(0, 0) < 0)
    return fail(MegatronSplitFlag::kEmbedding, "Not enough layers in the first virtual pipeline stage");
  if (f.loss && --stage(pp - 1, vpp - 1) < 0)
    return fail(MegatronSplitFlag::kLoss, "Not enough layers in the last virtual pipeline stage");
  out.stage_layers = std::move(layers);
  return out;
}

}  // namespace sc::config
