// keel tokenize: print the token ids of a text, as the model's tokenizer encodes it.
//   keel tokenize --model DIR TEXT          (a folder with tokenizer.json, or a GGUF model)
//   keel tokenize --tokenizer FILE TEXT     (a tokenizer.json anywhere)
// TEXT "-" reads standard input. --show-tokens prints one "id<TAB>token" line per token instead;
// --no-special encodes special tokens written in the text as plain text.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "args.h"
#include "commands.h"
#include "keel/arch/model_source.h"
#include "keel/engine/model_text.h"
#include "keel/text/tokenizer.h"
#include "keel/util/error.h"

namespace keel::cli {

int tokenize_command(const CommandArgs& argv) {
  Args args(argv, {"model", "tokenizer"}, {"show-tokens", "no-special"});
  if (args.has("model") == args.has("tokenizer")) throw Error("give exactly one of --model DIR or --tokenizer FILE");
  if (args.positional().size() != 1) throw Error("usage: keel tokenize --model DIR | --tokenizer FILE TEXT");

  auto tokenizer = args.has("model") ? load_model_tokenizer(arch::resolve_model(args.require("model")))
                                     : text::Tokenizer::from_file(args.require("tokenizer"));
  std::string input = args.positional()[0];
  if (input == "-") input.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());

  auto ids = tokenizer.encode(input, !args.has("no-special"));
  if (args.has("show-tokens")) {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, tokenizer.token_text(id).c_str());
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  return 0;
}

}  // namespace keel::cli
