#include "report/ci_report.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/version.h"

namespace sc {
namespace {

using nlohmann::json;

constexpr FindingRule kRules[] = {
    {"structure", "every (stage, microbatch) runs exactly one forward and one backward where its placement says",
     "Each (stage, microbatch) needs exactly one F and one backward (B, or I then W), ids in range, on the rank the "
     "declared placement gives its stage. Fix the action list named by the finding's locations."},
    {"causality", "every op runs after the ops whose results it reads",
     "F(s, mb) must follow F(s-1, mb); I/B(s, mb) must follow the backward of stage s+1 and F(s, mb); W(s, mb) must "
     "follow I(s, mb). A router is causal when no token's routing depends on later tokens or other sequences."},
    {"deadlock", "every op completes under the declared P2P semantics",
     "Under the spec's P2P semantics (rendezvous, eager or buffered) some op can never complete. The finding names "
     "the wait-for cycle and each stuck rank's trace; reorder the sends and receives or change the semantics."},
    {"channel", "sends and receives pair up in order, and collectives agree across their group",
     "Messages on a (src rank, dst rank, communicator) channel pair in FIFO order: the k-th send with the k-th "
     "receive, with the same stage, microbatch, kind and size; every member of a collective group issues the same "
     "collectives in the same order."},
    {"residency", "every buffer is live when an op reads it",
     "An op reads a buffer (an activation, a gathered parameter) that is not resident at that moment on every "
     "execution the happens-before order allows."},
    {"memory", "peak memory per rank stays within the limit on every interleaving",
     "The predicted peak, or the worst case over every execution the happens-before order allows (an exact "
     "maximum-weight closure), exceeds memory.limit_bytes on some rank. The finding names the rank, the moment and "
     "the live buffers."},
    {"numerics", "reducing collectives stay within the error and bias tolerances",
     "A reducing collective's rounding error, bias, underflow or overflow exceeds the spec's numerics tolerances "
     "for its element and accumulation types."},
    {"drop", "the router drops no token it must keep",
     "The router's capacity and drop policy can drop tokens (or drop them differently) under the declared bound."},
    {"determinism", "the router's decisions do not depend on evaluation order",
     "Two evaluations of the router on the same scores can route a token differently."},
    {"budget", "the schedule stays within the budgets its spec or the command line states",
     "A figure of the predicted schedule (bubble rate, span, step time, peak or worst-case bytes per rank, "
     "messages, communication bytes) exceeds the budget stated in the spec's budget: mapping or by --budget. "
     "The finding names the figure, its value and the budget."},
    {"spec-error", "the input file is a valid spec",
     "The file could not be read as a schedule: the message gives the place and the problem."},
};

/// The record's findings as (kind, message, ops, locations) with spec errors as findings of
/// kind "spec-error".
struct Item {
  std::string kind, property, message;
  std::vector<std::string> ops;
  std::vector<json> locations;  ///< {file, line, col} or null, aligned with ops where ops exist
  std::vector<int> ranks;
};

std::string path_of(const json& r) {
  if (r.contains("path") && r["path"].is_string()) return r["path"].get<std::string>();
  for (const char* k : {"schedule", "fsdp", "router"})
    if (r.contains(k) && r[k].is_object() && r[k].contains("path") && r[k]["path"].is_string())
      return r[k]["path"].get<std::string>();
  return "<input>";
}

std::vector<Item> items_of(const json& r) {
  std::vector<Item> out;
  if (r.contains("findings") && r["findings"].is_array())
    for (const json& f : r["findings"]) {
      Item it;
      it.kind = f.value("kind", "finding");
      it.property = f.value("property", it.kind);
      it.message = f.value("message", "");
      if (f.contains("ops") && f["ops"].is_array())
        for (const json& o : f["ops"]) it.ops.push_back(o.is_string() ? o.get<std::string>() : o.dump());
      if (f.contains("locations") && f["locations"].is_array())
        for (const json& l : f["locations"]) it.locations.push_back(l);
      if (f.contains("ranks") && f["ranks"].is_array())
        for (const json& k : f["ranks"])
          if (k.is_number_integer()) it.ranks.push_back(k.get<int>());
      out.push_back(std::move(it));
    }
  if (r.value("verdict", "") == "error") {
    bool any = false;
    if (r.contains("diagnostics") && r["diagnostics"].is_array())
      for (const json& d : r["diagnostics"]) {
        if (d.value("severity", "error") != "error") continue;
        Item it{"spec-error", "spec", d.value("message", ""), {}, {}, {}};
        if (!d.value("file", std::string()).empty()) it.locations.push_back(d);
        out.push_back(std::move(it));
        any = true;
      }
    if (!any) out.push_back(Item{"spec-error", "spec", "the file could not be checked (see the error output)", {}, {}, {}});
  }
  return out;
}

bool located(const json& l) {
  return l.is_object() && l.contains("file") && l["file"].is_string() && !l["file"].get<std::string>().empty() &&
         l.value("line", 0) >= 1;
}

/// The first located location of `it`, or none.
const json* first_location(const Item& it) {
  for (const json& l : it.locations)
    if (located(l)) return &l;
  return nullptr;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string fingerprint(const std::string& path, const Item& it) {
  std::string key = path + "\n" + it.kind + "\n";
  if (!it.ops.empty()) {
    std::vector<std::string> ops = it.ops;
    std::sort(ops.begin(), ops.end());
    for (const auto& o : ops) key += o + ",";
  } else {
    for (char c : it.message)
      if (!(c >= '0' && c <= '9')) key += c;
  }
  key += "\n";
  for (int r : it.ranks) key += std::to_string(r) + ",";
  return fmt::format("{:016x}", fnv1a(key));
}

/// A relative or absolute path as a URI reference: characters outside RFC 3986's unreserved
/// set and '/' percent-encoded.
std::string uri_of(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

json physical(const std::string& file, int line, int col) {
  json region = {{"startLine", std::max(line, 1)}};
  if (col >= 1) region["startColumn"] = col;
  return {{"physicalLocation", {{"artifactLocation", {{"uri", uri_of(file)}}}, {"region", region}}}};
}

std::vector<const FindingRule*> rule_list() {
  std::vector<const FindingRule*> out;
  for (const auto& r : kRules) out.push_back(&r);
  return out;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t') out += ' ';  // not allowed in XML 1.0
        else out += static_cast<char>(c);
    }
  }
  return out;
}

std::string loc_text(const json& l) {
  if (!located(l)) return "";
  return fmt::format("{}:{}:{}", l["file"].get<std::string>(), l.value("line", 0), l.value("col", 0));
}

/// "file:line:col: op" lines of an item (its located ops), for JUnit failure text.
std::string located_ops(const Item& it) {
  std::string out;
  for (size_t k = 0; k < it.locations.size(); ++k) {
    std::string at = loc_text(it.locations[k]);
    if (at.empty()) continue;
    out += at + (k < it.ops.size() ? ": " + it.ops[k] : "") + "\n";
  }
  return out;
}

const std::vector<std::string> kProgramProperties = {"structure", "causality", "deadlock", "channel",
                                                      "residency", "memory",    "numerics"};

}  // namespace

const FindingRule* finding_rules(size_t* count) {
  *count = std::size(kRules);
  return kRules;
}

std::string sarif_log(const json& records, int exit_code) {
  std::vector<json> rules;
  std::map<std::string, size_t> index;
  for (const auto* r : rule_list()) {
    index[r->id] = rules.size();
    rules.push_back({{"id", r->id},
                     {"name", r->id},
                     {"shortDescription", {{"text", r->description}}},
                     {"fullDescription", {{"text", r->help}}},
                     {"help", {{"text", r->help}}},
                     {"defaultConfiguration", {{"level", "error"}}}});
  }
  json results = json::array();
  json artifacts = json::array();
  for (const json& rec : records) {
    const std::string path = path_of(rec);
    artifacts.push_back({{"location", {{"uri", uri_of(path)}}}, {"roles", {"analysisTarget"}}});
    for (const Item& it : items_of(rec)) {
      if (!index.count(it.kind)) {
        index[it.kind] = rules.size();
        rules.push_back({{"id", it.kind},
                         {"shortDescription", {{"text", "a " + it.kind + " property holds"}}},
                         {"help", {{"text", "See the finding's message for the property and its counterexample."}}}});
      }
      json res = {{"ruleId", it.kind}, {"ruleIndex", index[it.kind]}, {"level", "error"},
                  {"message", {{"text", it.message.empty() ? it.kind : it.message}}}};
      const json* first = first_location(it);
      res["locations"] = json::array(
          {first ? physical((*first)["file"], (*first).value("line", 1), (*first).value("col", 0)) : physical(path, 1, 0)});
      json related = json::array();
      int id = 0;
      for (size_t k = 0; k < it.locations.size(); ++k) {
        const json& l = it.locations[k];
        if (!located(l) || &l == first) continue;
        json rl = physical(l["file"], l.value("line", 1), l.value("col", 0));
        rl["id"] = id++;
        if (k < it.ops.size()) rl["message"] = {{"text", it.ops[k]}};
        related.push_back(rl);
      }
      // Under `diff --format sarif`: the lines of this file the change touched, so a reviewer sees
      // a finding located at one key beside the key that was changed.
      if (rec.contains("keys_changed") && rec["keys_changed"].is_array())
        for (const json& k : rec["keys_changed"]) {
          if (!k.value("new_line", json()).is_number_integer()) continue;
          json rl = physical(path, k["new_line"].get<int>(), 1);
          rl["id"] = id++;
          const auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : std::string("(absent)"); };
          rl["message"] = {{"text", "changed here: " + k.value("key", std::string()) + " " + text(k["old"]) + " -> " +
                                        text(k["new"])}};
          related.push_back(rl);
        }
      if (!related.empty()) res["relatedLocations"] = related;
      res["partialFingerprints"] = {{"schedcheckFindingHash/v1", fingerprint(path, it)}};
      json props = {{"file", path}};
      if (!it.ops.empty()) props["ops"] = it.ops;
      if (!it.ranks.empty()) props["ranks"] = it.ranks;
      res["properties"] = props;
      results.push_back(res);
    }
  }
  json run = {{"tool",
               {{"driver",
                 {{"name", "schedcheck"},
                  {"version", kToolVersion},
                  {"semanticVersion", kToolVersion},
                  {"rules", rules}}}}},
              {"artifacts", artifacts},
              {"invocations", json::array({{{"executionSuccessful", exit_code != 1 && exit_code != 70},
                                            {"exitCode", exit_code}}})},
              {"results", results},
              {"columnKind", "unicodeCodePoints"}};
  json log = {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"}, {"version", "2.1.0"}, {"runs", {run}}};
  return log.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string junit_xml(const json& records) {
  std::string suites;
  size_t all_tests = 0, all_failures = 0, all_errors = 0;
  double all_seconds = 0;
  for (const json& rec : records) {
    const std::string path = path_of(rec);
    const std::vector<Item> items = items_of(rec);
    double seconds = 0;
    if (rec.contains("stats") && rec["stats"].is_object() && rec["stats"].contains("seconds") &&
        rec["stats"]["seconds"].is_number())
      seconds = rec["stats"]["seconds"].get<double>();
    // The properties this file was checked for, in a fixed order.
    std::vector<std::string> props;
    std::map<std::string, std::string> skipped;  // property -> why (router: not checked)
    const bool error = rec.value("verdict", "") == "error";
    if (error) {
      props = {"spec"};
    } else if (rec.contains("properties") && rec["properties"].is_object()) {
      for (const auto& [name, p] : rec["properties"].items()) {
        props.push_back(name);
        const std::string res = p.is_object() ? p.value("result", "") : "";
        if (res == "skipped" || res == "not checked") skipped[name] = p.value("message", res);
      }
    } else {
      props = kProgramProperties;
    }
    if (rec.contains("budgets") && rec["budgets"].is_array() && !rec["budgets"].empty()) props.push_back("budget");
    for (const Item& it : items)
      if (std::find(props.begin(), props.end(), it.property) == props.end()) props.push_back(it.property);
    std::string cases;
    size_t failures = 0, errors = 0;
    for (const std::string& prop : props) {
      std::string body;
      bool failed = false, errored = false;
      for (const Item& it : items) {
        if (it.property != prop) continue;
        const json* first = first_location(it);
        std::string where = first ? loc_text(*first) + ": " : path + ": ";
        std::string text = where + it.kind + ": " + it.message + "\n" + located_ops(it);
        if (error) {
          body += fmt::format("      <error message=\"{}\" type=\"spec-error\">{}</error>\n", xml_escape(where + it.message),
                              xml_escape(text));
          errored = true;
        } else {
          body += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml_escape(where + it.message),
                              xml_escape(it.kind), xml_escape(text));
          failed = true;
        }
      }
      failures += failed ? 1 : 0;
      errors += errored ? 1 : 0;
      if (body.empty() && skipped.count(prop))
        body = fmt::format("      <skipped message=\"{}\"/>\n", xml_escape(skipped[prop]));
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\"", xml_escape(path), xml_escape(prop));
      cases += body.empty() ? "/>\n" : ">\n" + body + "    </testcase>\n";
    }
    suites += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{:.6f}\">\n",
                          xml_escape(path), props.size(), failures, errors, skipped.size(), seconds);
    suites += fmt::format("    <properties>\n      <property name=\"verdict\" value=\"{}\"/>\n      <property "
                          "name=\"exit_code\" value=\"{}\"/>\n    </properties>\n",
                          xml_escape(rec.value("verdict", "")), rec.value("exit_code", 0));
    suites += cases + "  </testsuite>\n";
    all_tests += props.size();
    all_failures += failures;
    all_errors += errors;
    all_seconds += seconds;
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"schedcheck\" tests=\"{}\" "
                     "failures=\"{}\" errors=\"{}\" time=\"{:.6f}\">\n{}</testsuites>\n",
                     all_tests, all_failures, all_errors, all_seconds, suites);
}

std::string github_escape(const std::string& text, bool property) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      case ':': out += property ? "%3A" : ":"; break;
      case ',': out += property ? "%2C" : ","; break;
      default:
        // Other control characters (ESC, \x01, DEL) from spec text would reach the CI log raw,
        // where they can rewrite the terminal: shown as \xNN, which the runner does not decode.
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        else out += c;
    }
  }
  return out;
}

std::string github_annotations(const json& records, int exit_code, size_t max_annotations) {
  std::string out;
  size_t total = 0, written = 0;
  for (const json& rec : records) {
    const std::string path = path_of(rec);
    for (const Item& it : items_of(rec)) {
      ++total;
      if (written >= max_annotations) continue;
      ++written;
      const json* first = first_location(it);
      std::string props = "file=" + github_escape(first ? (*first)["file"].get<std::string>() : path, true);
      if (first) {
        props += ",line=" + std::to_string(first->value("line", 1));
        if (first->value("col", 0) >= 1) props += ",col=" + std::to_string(first->value("col", 0));
      }
      props += ",title=" + github_escape("schedcheck " + it.kind, true);
      std::string msg = it.message;
      std::string ops = located_ops(it);
      if (!ops.empty()) msg += "\n" + ops;
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      out += "::error " + props + "::" + github_escape(msg, false) + "\n";
    }
  }
  if (total > written)
    out += fmt::format("::warning::{}\n", github_escape(fmt::format("schedcheck: {} more findings not annotated (at most "
                                                                    "{} per run); see the job log or the JSON report",
                                                                    total - written, max_annotations),
                                                        false));
  out += results_summary(records, exit_code) + "\n";
  return out;
}

std::string first_error_of(const json& record) {
  if (record.contains("diagnostics") && record["diagnostics"].is_array())
    for (const json& d : record["diagnostics"]) {
      if (!d.is_object() || d.value("severity", "error") != "error") continue;
      std::string where = d.value("file", "");
      if (!where.empty() && d.value("line", 0) > 0) {
        where += fmt::format(":{}", d.value("line", 0));
        if (d.value("col", 0) > 0) where += fmt::format(":{}", d.value("col", 0));
      }
      return (where.empty() ? "" : where + ": ") + d.value("message", "");
    }
  return "";
}

std::string results_summary(const json& records, int exit_code) {
  std::map<std::string, size_t> verdicts;
  size_t total = 0;
  for (const json& rec : records) {
    ++verdicts[rec.value("verdict", "error")];
    total += items_of(rec).size();
  }
  std::string counts;
  for (const char* v : {"holds", "violated", "inconclusive", "error"})
    if (verdicts.count(v))  // "2 files, 1 hold, 1 in error"
      counts += fmt::format(", {} {}", verdicts[v],
                            v == std::string("holds") ? "hold" : v == std::string("error") ? "in error" : v);
  return fmt::format("schedcheck: {} file{}{}; {} finding{} (exit {})", records.size(), records.size() == 1 ? "" : "s",
                     counts, total, total == 1 ? "" : "s", exit_code);
}

}  // namespace sc
