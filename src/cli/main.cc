// The schedcheck command line.
#include "cli/cli.h"

int main(int argc, char** argv) { return sc::cli::run_cli(argc, argv); }
