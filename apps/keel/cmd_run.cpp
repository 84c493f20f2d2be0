// keel run: generate from a raw prompt (no chat template) and print the continuation.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "commands.h"
#include "keel/engine/model_text.h"
#include "keel/engine/raw_generation.h"
#include "keel/engine/standalone_sequence.h"
#include "keel/text/stream_decoder.h"
#include "keel/text/tokenizer.h"
#include "keel/util/error.h"
#include "model_flags.h"

namespace keel::cli {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    std::stringstream words(item);
    std::string w;
    while (words >> w) {
      size_t used = 0;
      long v = -1;
      try {
        v = std::stol(w, &used);
      } catch (const std::exception&) {
      }
      if (used != w.size() || v < 0 || v > INT32_MAX) throw Error("--tokens: '" + w + "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
  }
  if (ids.empty()) throw Error("--tokens is empty");
  return ids;
}

}  // namespace

int run_command(const CommandArgs& argv) {
  std::set<std::string> flags = kModelFlags;
  flags.insert(kSamplingFlags.begin(), kSamplingFlags.end());
  flags.insert({"prompt", "tokens", "max-tokens", "context", "prefill-chunk"});
  Args args(argv, flags, {"ids"});
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "'");
  if (args.has("prompt") == args.has("tokens")) throw Error("give exactly one of --prompt TEXT or --tokens IDS");

  // Every number is checked before the model loads: a bad flag costs nothing.
  GenerationOptions options;
  options.max_tokens = args.get_int("max-tokens", 128, 0, kMaxTokenCount);
  options.prefill_chunk = args.get_int("prefill-chunk", 256, 1, kMaxTokenCount);
  options.sampling = sampling_from_flags(args);
  std::optional<long> context_flag;
  if (args.get("context")) context_flag = args.get_int("context", 0, 1, kMaxTokenCount);

  LoadedModel m = load_model_from_flags(args);
  const std::optional<text::Tokenizer> tokenizer = find_model_tokenizer(m.source);

  std::vector<int32_t> prompt;
  if (args.has("prompt")) {
    if (!tokenizer) throw Error(m.weights.dir.string() + ": no tokenizer (no tokenizer.json), so --prompt cannot be used; pass --tokens IDS");
    prompt = tokenizer->encode(args.require("prompt"));
    if (prompt.empty()) throw Error("--prompt encodes to no tokens");
  } else {
    prompt = parse_ids(args.require("tokens"));
  }

  options.stop_ids = m.weights.eos_token_ids;
  if (tokenizer) options.masked_ids = ids_without_token(*tokenizer, m.weights.spec.vocab_size);
  const long context = context_flag.value_or(
      std::min<long>(static_cast<long>(m.weights.spec.max_position), static_cast<long>(prompt.size()) + options.max_tokens));

  Transformer model(m.weights, *m.pool);
  // A pool of its own under the `full` policy: every K/V row kept at bf16, as --context sizes it.
  StandaloneSequence cache(m.weights.spec, context);

  const bool print_ids = args.has("ids") || !tokenizer;
  std::optional<text::StreamDecoder> stream;
  if (!print_ids) stream.emplace(*tokenizer);
  bool first = true;
  auto result = generate_raw(model, cache.sequence(), prompt, options, [&](int32_t id) {
    if (print_ids) {
      std::printf(first ? "%d" : " %d", id);
    } else {
      std::fputs(stream->feed(id).c_str(), stdout);
    }
    first = false;
    std::fflush(stdout);
    return true;
  });
  if (stream) std::fputs(stream->flush().c_str(), stdout);
  std::fputc('\n', stdout);

  const auto& st = result.stats;
  std::fprintf(stderr, "keel: prompt %lld tokens in %.3f s (%.1f tok/s), generated %lld tokens in %.3f s (%.1f tok/s), stop: %s\n",
               static_cast<long long>(st.prompt_tokens), st.prefill_seconds,
               st.prefill_seconds > 0 ? static_cast<double>(st.prompt_tokens) / st.prefill_seconds : 0.0,
               static_cast<long long>(st.generated_tokens), st.decode_seconds,
               st.decode_seconds > 0 ? static_cast<double>(st.generated_tokens) / st.decode_seconds : 0.0,
               stop_reason_name(result.stop));
  return 0;
}

}  // namespace keel::cli
