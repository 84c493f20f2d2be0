#include "commands.h"
#include "keel/util/error.h"
namespace keel::cli {
int synth_command(const CommandArgs&) { throw Error("not implemented yet"); }
}  // namespace keel::cli
