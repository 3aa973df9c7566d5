#!/usr/bin/env python3
"""Writes src/config/config_keys.cc: the keys torchtitan, DeepSpeed and Megatron-LM define, from
git checkouts of the three repositories at the commits below (docs/facts/config-keys.md#key-dictionaries).

  scripts/config_keys.py TORCHTITAN_GIT DEEPSPEED_GIT MEGATRON_GIT > src/config/config_keys.cc

torchtitan: every `--section.key` of the argparse era and every field of the JobConfig dataclasses
(section = JobConfig field, nested dataclasses give dotted keys) over the history of
torchtitan/config_manager.py and torchtitan/config/job_config.py up to the last TOML commit, plus
the current (token-based) names the reader accepts. DeepSpeed: the lower-case string values of the
upper-case constants and the pydantic fields (with aliases) of deepspeed/**/{config,constants}*.py,
plus the `pipeline` block's keys (runtime/config.py get_pipeline_config). Megatron-LM: every
'--flag' literal of arguments.py at about 40 commits over its history and at the pinned commit,
plus the flags ArgumentGroupFactory generates from the config dataclasses (--field-name, and
--no-/--disable- forms for booleans).
"""
import ast
import re
import subprocess
import sys

TORCHTITAN = "238fa9953e4aec2a62582121564273d7cbb1e9f1"
DEEPSPEED = "edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
MEGATRON = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"

# Names the TOML reader accepts from the current torchtitan config system (commit 73aed7f6c09c and
# torchtitan/config/configs.py at b5bcd76c) and the nested quantize tables of JobConfig.
TORCHTITAN_EXTRA = [
    "training.num_tokens_per_microbatch_per_dp_rank", "training.num_tokens_per_train_step",
    "training.max_context_length", "training.disable_cuda_graphs", "parallelism.num_pp_microbatches",
    "parallelism.enable_fsdp_symm_mem", "parallelism.enable_sequence_parallel", "parallelism.spmd_backend",
    "parallelism.context_parallel_ptrr_mask_key", "compile.enable_async_tensor_parallel",
    "parallelism.data_parallel_degree", "training.batch_size",
    "quantize.linear.float8.enable_fsdp_float8_all_gather",
    "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", "quantize.linear.float8.recipe_name",
    "quantize.linear.float8.filter_fqns", "quantize.linear.float8.emulate",
    "quantize.linear.mx.mxfp8_dim1_cast_kernel_choice", "quantize.linear.mx.recipe_name",
    "quantize.linear.mx.filter_fqns", "quantize.grouped_mm.float8.fqns", "quantize.grouped_mm.mx.recipe_name",
    "quantize.grouped_mm.mx.fqns", "quantize.dense.*", "quantize.moe.*",
]
DEEPSPEED_EXTRA = ["pipeline", "stages", "partition", "seed_layers", "activation_checkpoint_interval",
                   "pipe_partitioned", "grad_partitioned", "use_reentrant"]


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True).stdout


def dataclasses(src):
    """{class: ([(field, annotation)], [base names])} of a Python source."""
    out = {}
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.ClassDef):
            fields = [(b.target.id, ast.unparse(b.annotation)) for b in n.body
                      if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name)]
            out.setdefault(n.name, (fields, [ast.unparse(x).split(".")[-1] for x in n.bases]))
    return out


def torchtitan_keys(repo):
    keys = set(TORCHTITAN_EXTRA)
    files = ("torchtitan/config_manager.py", "torchtitan/config/job_config.py")
    for c in git(repo, "log", "--format=%H", TORCHTITAN, "--", *files).split():
        for path in files:
            src = git(repo, "show", f"{c}:{path}")
            if not src:
                continue
            keys.update(f"{a}.{b}" for a, b in re.findall(r'"--([a-z_0-9]+)\.([a-z_0-9]+)"', src))
            try:
                classes = dataclasses(src)
            except SyntaxError:
                continue
            for section, ann in classes.get("JobConfig", ([], []))[0]:
                cls = re.match(r"\w+", ann).group(0)
                for key, kann in classes.get(cls, ([], []))[0]:
                    sub = re.match(r"\w+", kann).group(0)
                    if sub in classes and sub != cls:
                        keys.update(f"{section}.{key}.{k}" for k, _ in classes[sub][0])
                    else:
                        keys.add(f"{section}.{key}")
    return sorted(keys)


def deepspeed_keys(repo):
    keys = set(DEEPSPEED_EXTRA)
    for f in git(repo, "ls-tree", "-r", "--name-only", DEEPSPEED, "deepspeed").split():
        if not f.endswith(".py") or ("config" not in f and "constants" not in f):
            continue
        try:
            tree = ast.parse(git(repo, "show", f"{DEEPSPEED}:{f}"))
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                    and n.targets[0].id.isupper() and isinstance(n.value, ast.Constant)
                    and isinstance(n.value.value, str) and re.fullmatch(r"[a-z][a-z0-9_]*", n.value.value)):
                keys.add(n.value.value)
            if isinstance(n, ast.ClassDef) and any("Model" in ast.unparse(b) or "Config" in ast.unparse(b) for b in n.bases):
                for b in n.body:
                    if isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name) and not b.target.id.startswith("_"):
                        keys.add(b.target.id)
                        if b.value is not None:
                            keys.update(re.findall(r"alias\s*=\s*[\"']([a-z0-9_]+)[\"']", ast.unparse(b.value)))
    return sorted(keys)


def megatron_flags(repo):
    flags = set()
    files = ("megatron/training/arguments.py", "megatron/arguments.py")
    commits = git(repo, "log", "--format=%H", MEGATRON, "--", *files).split()
    for c in commits[:: max(1, len(commits) // 40)] + [MEGATRON]:
        for p in files:
            flags.update(re.findall(r"""['"](--[a-z0-9][a-z0-9_-]*)['"]""", git(repo, "show", f"{c}:{p}")))
    names = ["TransformerConfig", "ModelParallelConfig", "StragglerDetectionConfig", "LoggerConfig", "ProfilingConfig",
             "TrainingConfig", "RerunStateMachineConfig", "RNGConfig", "SchedulerConfig", "CheckpointConfig",
             "DistributedInitConfig", "ValidationConfig", "TokenizerConfig", "FaultInjectorConfig"]
    classes = {}
    for hit in git(repo, "grep", "-l", "-E", "^class (" + "|".join(names) + r")\b", MEGATRON, "--", "megatron").split():
        try:
            for k, v in dataclasses(git(repo, "show", f"{MEGATRON}:{hit.split(':', 1)[1]}")).items():
                classes.setdefault(k, v)
        except SyntaxError:
            pass

    def fields(c, seen):
        if c not in classes or c in seen:
            return []
        seen.add(c)
        f, bases = classes[c]
        return f + [x for b in bases for x in fields(b, seen)]

    for c in names:
        for name, ann in fields(c, set()):
            if name.startswith("_"):
                continue
            flag = name.replace("_", "-")
            flags.add("--" + flag)
            if "bool" in ann:
                flags.update({"--no-" + flag, "--disable-" + flag})
    return sorted(flags)


def table(name, items):
    body = "".join(f'      "{k}",\n' for k in items)
    return (f"const std::vector<std::string>& {name}() {{\n  static const std::vector<std::string> k = {{\n{body}  }};\n"
            f"  return k;\n}}\n\n")


def main():
    tt, ds, mg = sys.argv[1:4]
    print("// Generated by scripts/config_keys.py from upstream checkouts; do not edit by hand.")
    print(f"// torchtitan {TORCHTITAN}, DeepSpeed {DEEPSPEED}, Megatron-LM {MEGATRON}")
    print("// (docs/facts/config-keys.md#key-dictionaries).")
    print('#include "config/config_keys.h"\n\nnamespace sc::config {\n')
    print(table("torchtitan_keys", torchtitan_keys(tt)), end="")
    print(table("deepspeed_keys", deepspeed_keys(ds)), end="")
    print(table("megatron_flags", megatron_flags(mg)), end="")
    print("}  // namespace sc::config")


if __name__ == "__main__":
    main()
