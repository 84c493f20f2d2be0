#pragma once
// Each subcommand is a function taking the arguments after its name and returning the exit code.
// It may throw keel::Error; main() prints the message and exits with status 1.
#include <string>
#include <vector>

namespace keel::cli {

using CommandArgs = std::vector<std::string>;

int run_command(const CommandArgs& args);    // keel run
int bench_command(const CommandArgs& args);  // keel bench
int synth_command(const CommandArgs& args);  // keel synth
int plan_command(const CommandArgs& args);   // keel plan
int tokenize_command(const CommandArgs& args);  // keel tokenize
int render_command(const CommandArgs& args);  // keel render
int serve_command(const CommandArgs& args);   // keel serve
int eval_command(const CommandArgs& args);    // keel eval

}  // namespace keel::cli
