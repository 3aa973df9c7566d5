// libFuzzer harness: `schedcheck plan --merge SHARE...`, the reader of the shares `plan --shard
// K/N` writes. The input is one share; it is merged alone, and beside a fixed valid share 2/2 of
// the sweep the seed share 1/2 belongs to (fuzz/seeds/plan-share-*.share), so that a mutated
// valid share reaches the ranking. Whatever the input says, the command must answer with an exit
// code of its documented set (0, 13, 5, 2), never an internal error (70), and must write nothing.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_util.h"
#include "support/source.h"

namespace {

/// Share 2/2 of the seed's sweep (llama3-debug on 8 and 16 GPUs, 64K tokens, 2048 per sequence).
constexpr const char* kShare2 = R"({"points":[{"candidates_considered":102,"exit_code":0,
"flops_per_step":4686581071872.0,"global_batch_tokens":65536,"gpus":16,"hardware":"h100","index":1,
"model":"llama3-debug","ranked":[{"bubble_rate":0.0,"dp_replicate":1,"dp_shard":16,
"estimated_step_time_s":0.004,"exit_code":0,"fsdp_crossover_tokens":2559.0,"mfu":0.079,
"microbatch_sequences":2,"microbatches":1,"peak_bytes":299343200,"pp":1,"recompute":"none",
"schedule":"1f1b","stages_per_rank":1,"step_time_s":0.0045,"tp":1,"verdict":"holds",
"worst_case_bytes":299343200}],"rejected":[],"seconds":0.003,"seq_len":2048}],
"schedcheck_plan_share":1,"shard":{"count":2,"index":2},"sweep":{"efficiency":null,
"global_batch_tokens":65536,"gpus":[8,16],"hardware":["h100"],"max_pp":64,"models":["llama3-debug"],
"seq_len":2048,"verify_top":1}})";

std::string write(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = "/tmp/schedcheck-fuzz-" + std::to_string(getpid()) + "-" + name;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

void check(int code) {
  if (code != 0 && code != 2 && code != 5 && code != 13) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string other = write(
      "share2.json", reinterpret_cast<const uint8_t*>(kShare2), std::char_traits<char>::length(kShare2));
  const std::string share = write("share1.json", data, size);
  check(sc::fuzz::run_cli_quiet({"schedcheck", "plan", "--merge", share}));
  check(sc::fuzz::run_cli_quiet({"schedcheck", "plan", "--merge", share, other, "--format", "json"}));
  sc::clear_sources();
  return 0;
}
