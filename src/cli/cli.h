// The schedcheck command line as a function: what `main` runs, and what tests run in process.
#pragma once

namespace sc::cli {

/// Parses `argv` (argv[0] is the program name) and runs the command it names: `verify`, `gen`,
/// `compare`, `synth`, `run`, `numerics`, `diff`, `plan` or `lower`. Reports go to standard
/// output, messages to standard error. Returns the exit code (the list in `schedcheck --help`);
/// an exception that escapes a command is an internal error (70), its message on standard error.
int run_cli(int argc, char** argv);

}  // namespace sc::cli
