// The SVG timeline as a renderer draws it: ops in their colours where the XML puts them, idle
// lanes empty, the memory limit and a deadlock's stuck marks in red, a large run still drawn.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "catch.h"
#include "cli_util.h"
#include "test_util.h"

namespace sc {
namespace {

struct Rgb {
  int r = -1, g = -1, b = -1;
};

Rgb hex(const std::string& s) {
  return {std::stoi(s.substr(1, 2), nullptr, 16), std::stoi(s.substr(3, 2), nullptr, 16), std::stoi(s.substr(5, 2), nullptr, 16)};
}

bool near(const Rgb& a, const Rgb& b) { return std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b) <= 24; }

bool have_rsvg() { return std::system("command -v rsvg-convert >/dev/null 2>&1") == 0; }

std::string temp(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "schedcheck-svg-test";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Renders `svg` with rsvg-convert and returns the image size and the colours at `points`.
struct Picture {
  int width = 0, height = 0;
  std::vector<Rgb> colours;
};

std::string run(const std::string& cmd) {
  std::string out;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  REQUIRE(pclose(pipe) == 0);
  return out;
}

Picture render(const std::string& svg, const std::vector<std::pair<double, double>>& points) {
  std::string png = svg + ".png";
  run("rsvg-convert -o '" + png + "' '" + svg + "'");
  std::string cmd = "python3 '" + test::source_path("tests/png_probe.py") + "' '" + png + "'";
  for (const auto& [x, y] : points) cmd += " " + std::to_string(static_cast<int>(x)) + "," + std::to_string(static_cast<int>(y));
  std::istringstream in(run(cmd));
  Picture p;
  in >> p.width >> p.height;
  for (size_t i = 0; i < points.size(); ++i) {
    Rgb c;
    in >> c.r >> c.g >> c.b;
    p.colours.push_back(c);
  }
  return p;
}

struct Box {
  double x, y, w, h;
  std::string fill, cls;
};

// The rectangles of class `cls` in `svg`, with their geometry and fill.
std::vector<Box> boxes(const std::string& svg, const std::string& cls) {
  std::regex re("<rect class=\"" + cls + "\"[^>]* x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" height=\"([0-9.]+)\" fill=\"(#[0-9a-f]{6})\"");
  std::vector<Box> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4]), (*it)[5], cls});
  return out;
}

std::string write_svg(const std::string& args, const std::string& name, int expect_exit) {
  std::string svg = temp(name);
  std::filesystem::remove(svg);
  auto r = test::run_schedcheck(args + " --svg '" + svg + "'");
  INFO(r.out);
  REQUIRE(r.exit_code == expect_exit);
  return svg;
}

}  // namespace

TEST_CASE("the SVG timeline renders each op in its kind's colour where the XML puts it", "[report][svg]") {
  std::string path = write_svg("verify examples/llama7b-pp8-1f1b.yaml", "llama.svg", 0);
  std::string svg = test::read_file(path);
  auto ops = boxes(svg, "op");
  REQUIRE(ops.size() == 256);  // every op is wide enough to draw on its own
  CHECK(svg.find("class=\"arrow\"") != std::string::npos);
  CHECK(svg.find("class=\"memory\"") != std::string::npos);
  // The 80 GiB limit is far above every peak (30 GiB): named, not drawn, so the curves keep their height.
  CHECK(svg.find("class=\"limit\"") == std::string::npos);
  CHECK(svg.find("the limit, 80 GiB, is above every peak") != std::string::npos);
  if (!have_rsvg()) {
    SC_SKIP("rsvg-convert not found (Debian: librsvg2-bin); the rendering checks are skipped");
  }
  // Sample op centres (left of centre: labels sit in the middle) and, on rank 7's lane, the
  // idle time before its first op.
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < ops.size(); i += 8) points.push_back({ops[i].x + ops[i].w * 0.2 + 1, ops[i].y + 2});
  auto lanes = boxes(svg, "lane");
  REQUIRE(lanes.size() == 8);
  points.push_back({lanes[7].x + 3, lanes[7].y + lanes[7].h / 2});
  Picture pic = render(path, points);
  CHECK(pic.width == 1760);
  size_t k = 0;
  for (size_t i = 0; i < ops.size(); i += 8, ++k) {
    INFO("op rect " << i << " at " << points[k].first << "," << points[k].second);
    CHECK(near(pic.colours[k], hex(ops[i].fill)));
  }
  CHECK(near(pic.colours.back(), hex("#f1f1f1")));  // idle shows as empty lane
}

TEST_CASE("the SVG draws the memory limit in red across each rank's memory strip", "[report][svg]") {
  std::string path = write_svg("verify examples/gpipe-over-memory-limit.yaml", "gpipe.svg", 13);
  std::string svg = test::read_file(path);
  std::regex re("<line class=\"limit\" x1=\"([0-9.]+)\" y1=\"([0-9.]+)\"");
  std::vector<std::pair<double, double>> points;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    points.push_back({std::stod((*it)[1]) + 1.5, std::stod((*it)[2])});  // inside the first dash
  REQUIRE(points.size() == 4);  // one per rank
  if (!have_rsvg()) return;
  Picture pic = render(path, points);
  for (const Rgb& c : pic.colours) CHECK((c.r > c.g + 50 && c.r > c.b + 50));  // red, anti-aliased
}

TEST_CASE("the SVG of a deadlock shows the executed prefix and a red mark where each stream is stuck", "[report][svg]") {
  std::string path = write_svg("verify examples/interleaved-rendezvous-deadlock.yaml", "deadlock.svg", 11);
  std::string svg = test::read_file(path);
  auto stuck = boxes(svg, "stuck");
  REQUIRE(stuck.size() == 4);
  CHECK(!boxes(svg, "op").empty());
  CHECK(svg.find("stuck at 0SEND_F1") != std::string::npos);
  CHECK(svg.find("class=\"waits\"") != std::string::npos);
  CHECK(svg.find("wait-for cycle 0SEND_F1@rank 0 (comm stream) -&gt; 1SEND_F0") != std::string::npos);
  if (!have_rsvg()) return;
  std::vector<std::pair<double, double>> points;
  for (const Box& b : stuck) points.push_back({b.x + 1, b.y + b.h / 2});
  Picture pic = render(path, points);
  for (const Rgb& c : pic.colours) CHECK(near(c, hex("#e15759")));
}

TEST_CASE("the SVG of 64 ranks x 1000 ops stays readable: merged sub-pixel ops, said so, every lane drawn",
          "[report][svg]") {
  std::string spec = temp("p64.yaml");
  auto gen = test::run_schedcheck("gen 1f1b --ranks 64 --microbatches 500 --format yaml -o '" + spec + "'");
  REQUIRE(gen.exit_code == 0);
  std::string path = write_svg("verify '" + spec + "' --format json", "p64.svg", 0);
  std::string svg = test::read_file(path);
  CHECK(svg.size() < 16u << 20);
  CHECK(svg.find("ops narrower than a pixel are merged") != std::string::npos);
  auto lanes = boxes(svg, "lane");
  REQUIRE(lanes.size() == 64);
  if (!have_rsvg()) return;
  // Mid-run every rank is busy: the middle of each lane is coloured, not lane grey.
  std::vector<std::pair<double, double>> points;
  for (const Box& b : lanes) points.push_back({b.x + b.w / 2, b.y + b.h / 2});
  Picture pic = render(path, points);
  CHECK(pic.height < 4000);
  for (size_t i = 0; i < lanes.size(); ++i) {
    INFO("lane " << i);
    CHECK_FALSE(near(pic.colours[i], hex("#f1f1f1")));
    CHECK_FALSE(near(pic.colours[i], hex("#ffffff")));
  }
}

}  // namespace sc

namespace sc {

TEST_CASE("the SVG folds ranks alike into one labelled lane group and labels every lane", "[report][svg]") {
  // examples/torchtitan-llama3-8b-pp2.toml: 64 ranks, PP 2 x 32 FSDP replicas each alike. Before,
  // 64 unlabelled groups of lanes.
  std::string path = write_svg("verify examples/torchtitan-llama3-8b-pp2.toml", "pp2.svg", 0);
  std::string svg = test::read_file(path);
  const auto lanes = boxes(svg, "lane");
  CHECK(lanes.size() == 6);  // 2 groups x (compute, all-gather, reduce)
  CHECK(svg.find(">ranks 0-31 (32) compute</text>") != std::string::npos);
  CHECK(svg.find(">ranks 32-63 (32) reduce</text>") != std::string::npos);
  CHECK(svg.find("64 ranks drawn in 2 groups") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(svg, m, std::regex("<svg [^>]*height=\"([0-9]+)\"")));
  CHECK(std::stoi(m[1]) <= 900);
  // Every lane has its label.
  size_t labels = 0;
  for (size_t at = svg.find("class=\"lane-label\""); at != std::string::npos; at = svg.find("class=\"lane-label\"", at + 1))
    ++labels;
  CHECK(labels == lanes.size());
}

TEST_CASE("the SVG of an FSDP job built as one rank labels its lanes with every rank it stands for",
          "[report][svg][symmetry]") {
  // examples/fsdp2-llama3-8b.yaml: 8 ranks running one program, built once (docs/facts/symmetry.md).
  std::string path = write_svg("verify examples/fsdp2-llama3-8b.yaml", "fsdp-quotient.svg", 0);
  std::string svg = test::read_file(path);
  CHECK(svg.find(">ranks 0-7 (8) compute</text>") != std::string::npos);
  CHECK(svg.find(": holds, 8 ranks, ") != std::string::npos);
  CHECK(svg.find("8 ranks drawn in 1 group:") != std::string::npos);
  CHECK(svg.find(">rank 0 compute<") == std::string::npos);
  // Each unit's forward and backward in the colours of F and B, as in a pipeline's timeline
  // (they once all took the "other compute" colour).
  size_t forwards = 0, backwards = 0;
  std::regex op_re("<rect class=\"op\"[^>]* fill=\"(#[0-9a-f]{6})\"[^>]*><title>([FB]) layer");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), op_re); it != std::sregex_iterator(); ++it) {
    const std::string fill = (*it)[1], kind = (*it)[2];
    if (kind == "F") {
      ++forwards;
      CHECK(fill == "#4e79a7");
    } else {
      ++backwards;
      CHECK(fill == "#59a14f");
    }
  }
  CHECK(forwards >= 32);
  CHECK(backwards >= 32);
}

TEST_CASE("compare --svg draws each schedule's timeline on one time scale", "[report][svg][compare]") {
  std::string path = write_svg("compare examples/compare-p4-m8.yaml --schedules 1f1b,zb-h1", "compare.svg", 0);
  std::string svg = test::read_file(path);
  size_t groups = 0;
  for (size_t at = svg.find("class=\"timeline\""); at != std::string::npos; at = svg.find("class=\"timeline\"", at + 1)) ++groups;
  CHECK(groups == 2);
  // One scale: the 27 s ZB-H1 run spans 27/33 of the 33 s 1F1B run's width.
  CHECK(svg.find("1f1b: holds, 4 ranks, 64 ops | makespan 33 s") != std::string::npos);
  CHECK(svg.find("zb-h1: holds, 4 ranks, 96 ops | makespan 27 s") != std::string::npos);
  CHECK(svg.find("time 0 to 33 s left to right") != std::string::npos);
  CHECK(svg.find("time 0 to 27 s") == std::string::npos);
  if (!have_rsvg()) return;
  Picture pic = render(path, {});
  CHECK(pic.height > 300);
}

}  // namespace sc

namespace sc {

TEST_CASE("run --svg --dry-run draws the predicted timeline above the replayed one on one time scale", "[report][svg][gpu-plan]") {
  std::string path = write_svg("run examples/gpu-zbh1-p4-m8.yaml --dry-run", "run.svg", 0);
  std::string svg = test::read_file(path);
  std::vector<size_t> starts;
  for (size_t at = svg.find("<g class=\"timeline\""); at != std::string::npos; at = svg.find("<g class=\"timeline\"", at + 1))
    starts.push_back(at);
  REQUIRE(starts.size() == 2);
  std::string predicted = svg.substr(starts[0], starts[1] - starts[0]);
  std::string measured = svg.substr(starts[1]);
  CHECK(predicted.find("gpu-zbh1-p4-m8 predicted: holds, 4 ranks") != std::string::npos);
  CHECK(measured.find("gpu-zbh1-p4-m8 measured on replay (ideal in-memory GPU, no device): holds, 4 ranks") !=
        std::string::npos);
  // The ideal GPU reproduces the prediction: the same ops at the same places, one lane offset.
  auto p_ops = boxes(predicted, "op"), m_ops = boxes(measured, "op");
  REQUIRE(p_ops.size() == 96);  // 4 ranks x 8 microbatches x (F, I, W)
  REQUIRE(m_ops.size() == p_ops.size());
  for (size_t i = 0; i < p_ops.size(); ++i) {
    CHECK(m_ops[i].x == Approx(p_ops[i].x).margin(0.01));
    CHECK(m_ops[i].w == Approx(p_ops[i].w).margin(0.01));
    CHECK(m_ops[i].fill == p_ops[i].fill);
  }
  std::smatch off;
  REQUIRE(std::regex_search(measured, off, std::regex("translate\\(0,([0-9]+)\\)")));
  double dy = std::stod(off[1]);
  CHECK(dy > 300);
  if (!have_rsvg()) {
    SC_SKIP("rsvg-convert not found (Debian: librsvg2-bin); the rendering checks are skipped");
  }
  // Each measured op renders in its kind's colour, below its predicted twin.
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < p_ops.size(); i += 7) {
    points.push_back({p_ops[i].x + p_ops[i].w * 0.2, p_ops[i].y + p_ops[i].h / 2});
    points.push_back({m_ops[i].x + m_ops[i].w * 0.2, dy + m_ops[i].y + m_ops[i].h / 2});
  }
  Picture pic = render(path, points);
  CHECK(pic.height == static_cast<int>(std::lround(2 * dy)));
  for (size_t k = 0; k < points.size(); k += 2) {
    INFO("op " << (k / 2) * 7);
    CHECK(near(pic.colours[k], hex(p_ops[(k / 2) * 7].fill)));
    CHECK(near(pic.colours[k + 1], hex(p_ops[(k / 2) * 7].fill)));
  }
}

}  // namespace sc

namespace sc {

TEST_CASE("compare --svg draws the spec's own schedule and a microbatch sweep one below the other", "[report][svg][compare]") {
  std::string path = write_svg("compare examples/compare-p4-m8.yaml --schedules self,1f1b,zb-h1 --microbatches 8,16,32",
                               "compare-sweep.svg", 0);
  std::string svg = test::read_file(path);
  size_t groups = 0;
  for (size_t at = svg.find("class=\"timeline\""); at != std::string::npos; at = svg.find("class=\"timeline\"", at + 1)) ++groups;
  CHECK(groups == 7);  // self at m = 8 only, 1f1b and zb-h1 at each m
  CHECK(svg.find("self (p = 4, m = 8): p4-m8-reference: holds") != std::string::npos);
  CHECK(svg.find("1f1b (p = 4, m = 32): holds, 4 ranks, 256 ops | makespan 105 s") != std::string::npos);
  // One scale: the longest run, 1F1B at m = 32 ((32 + 3) x 3 s), sets it for every timeline.
  CHECK(svg.find("time 0 to 105 s left to right") != std::string::npos);
  if (!have_rsvg()) return;
  Picture pic = render(path, {});
  CHECK(pic.height > 7 * 150);
}

}  // namespace sc
