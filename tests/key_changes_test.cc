// config::changed_keys: the keys that differ between two versions of a file, with their lines.
#include <string>

#include "catch.h"
#include "config/key_changes.h"

using sc::config::changed_keys;

TEST_CASE("changed_keys lists a TOML config's changed, added and removed keys at their lines", "[config][diff]") {
  const std::string old_toml = "[parallelism]\npipeline_parallel_degree = 2\ncontext_parallel_degree = 1\n"
                               "[training]\nlocal_batch_size = 8  # per rank\n";
  const std::string new_toml = "# a comment moves the lines\n[parallelism]\npipeline_parallel_degree = 4\n"
                               "[training]\nlocal_batch_size = 8\nseq_len = 8192\n";
  const auto k = changed_keys("train.toml", old_toml, new_toml);
  REQUIRE(k.size() == 3);
  CHECK(k[0].key == "parallelism.pipeline_parallel_degree");
  CHECK(k[0].old_value == "2");
  CHECK(k[0].new_value == "4");
  CHECK(k[0].old_line == 2);
  CHECK(k[0].new_line == 3);
  CHECK(k[1].key == "training.seq_len");
  CHECK_FALSE(k[1].old_value);
  CHECK(k[1].new_value == "8192");
  CHECK(k[1].new_line == 6);
  CHECK(k[2].key == "parallelism.context_parallel_degree");
  CHECK(k[2].old_value == "1");
  CHECK_FALSE(k[2].new_value);
  CHECK(k[2].old_line == 3);
}

TEST_CASE("changed_keys reads YAML specs and DeepSpeed JSON by path, lists included", "[config][diff]") {
  const auto y = changed_keys("s.yaml", "ranks: 4\np2p: {semantics: rendezvous}\nphases:\n  - {microbatches: 4}\n",
                              "ranks: 4\np2p: {semantics: eager}\nphases:\n  - {microbatches: 8}\n");
  REQUIRE(y.size() == 2);
  CHECK(y[0].key == "p2p.semantics");
  CHECK(y[0].old_value == "rendezvous");
  CHECK(y[0].new_value == "eager");
  CHECK(y[0].new_line == 2);
  CHECK(y[1].key == "phases[0].microbatches");
  CHECK(y[1].new_line == 4);
  const auto j = changed_keys("ds.json", "{\n  \"zero_optimization\": {\n    \"stage\": 2\n  }\n}\n",
                              "{\n  \"zero_optimization\": {\n    \"stage\": 3\n  }\n}\n");
  REQUIRE(j.size() == 1);
  CHECK(j[0].key == "zero_optimization.stage");
  CHECK(j[0].new_line == 3);
}

TEST_CASE("changed_keys reads a launch script's flags after expansion, and nothing from a CSV", "[config][diff]") {
  const std::string old_sh = "#!/bin/bash\nPP=2\ntorchrun pretrain_gpt.py \\\n  --pipeline-model-parallel-size $PP \\\n"
                             "  --micro-batch-size 1\n";
  const std::string new_sh = "#!/bin/bash\nPP=4\ntorchrun pretrain_gpt.py \\\n  --pipeline-model-parallel-size $PP \\\n"
                             "  --micro-batch-size 1 --sequence-parallel\n";
  const auto k = changed_keys("train.sh", old_sh, new_sh);
  REQUIRE(k.size() == 2);
  CHECK(k[0].key == "--pipeline-model-parallel-size");
  CHECK(k[0].old_value == "2");
  CHECK(k[0].new_value == "4");
  CHECK(k[0].new_line == 4);
  CHECK(k[1].key == "--sequence-parallel");
  CHECK(k[1].new_value == "(set)");
  CHECK(changed_keys("s.csv", "0F0\n", "0F1\n").empty());
  CHECK(changed_keys("s.toml", "a = [", "a = 1").empty());  // a side that does not parse: the readers say so
}

TEST_CASE("changed_keys keeps a TOML value with multi-byte characters whole", "[config][diff]") {
  const auto k = changed_keys("t.toml", "[job]\ndescription = \"Llama \u2013 8B\"\n", "[job]\ndescription = \"Llama \u2013 70B\"\n");
  REQUIRE(k.size() == 1);
  CHECK(k[0].old_value == "\"Llama \u2013 8B\"");
  CHECK(k[0].new_value == "\"Llama \u2013 70B\"");
}
