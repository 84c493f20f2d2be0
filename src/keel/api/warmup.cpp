#include "keel/api/warmup.h"

#include <cstdio>
#include <memory>

#include "keel/api/cache_salt.h"
#include "keel/api/chat_request.h"
#include "keel/api/log_text.h"
#include "keel/api/server_state.h"
#include "keel/engine/chat_turn.h"
#include "keel/engine/scheduler.h"
#include "keel/engine/served_model.h"
#include "keel/util/error.h"

namespace keel::api {
namespace {

// The namespace a warm-up fills: the one every request shares with one API key or none; with
// several, the first key's (as Server gives a request that presents it).
uint64_t warm_salt(const ServerState& s) {
  return s.options.api_keys.size() >= 2 ? cache_salt_for_key(s.options.api_keys.front()) : 0;
}

ChatRequest parse_warm(const WarmRequest& w, const RequestLimits& limits) {
  return w.protocol == Protocol::Anthropic ? parse_anthropic_request(w.body, limits) : parse_openai_request(w.body, limits);
}

void fail(ServerState& s, const WarmRequest& w, const std::string& why) {
  std::fprintf(stderr, "keel serve: --warm %s: %s (skipped)\n", w.path.c_str(), log_safe(why, 500).c_str());
  ++s.warmup.failed;
}

}  // namespace

WarmRequest read_warm_request(const std::filesystem::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error("--warm: cannot read '" + path.string() + "'");
  WarmRequest w{path, Protocol::Anthropic, {}};
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) w.body.append(buf, n);
  std::fclose(f);
  const RequestLimits limits;
  std::string anthropic_error;
  try {
    parse_anthropic_request(w.body, limits);
    return w;
  } catch (const std::exception& e) {
    anthropic_error = e.what();
  }
  try {
    parse_openai_request(w.body, limits);
    w.protocol = Protocol::OpenAI;
    return w;
  } catch (const std::exception& e) {
    throw Error("--warm: '" + path.string() + "' is neither an Anthropic Messages request (" + anthropic_error +
                ") nor an OpenAI Chat Completions request (" + e.what() + ")");
  }
}

void start_warmup(ServerState& s, std::vector<WarmRequest> requests) {
  s.warmup.total += static_cast<int64_t>(requests.size());
  for (const WarmRequest& w : requests) {
    std::shared_ptr<const PreparedPrompt> prompt;
    ChatRequest r;
    try {
      r = parse_warm(w, s.options.limits);
      prompt = std::make_shared<const PreparedPrompt>(
          s.model.prepare(r.messages, r.tools, PromptControls{r.thinking, r.reasoning_effort, r.assistant_prefill}));
      if (static_cast<int64_t>(prompt->ids.size()) >= s.session.capacity())
        throw Error(std::to_string(prompt->ids.size()) + " prompt tokens do not fit the context of " +
                    std::to_string(s.session.capacity()));
    } catch (const std::exception& e) {
      fail(s, w, e.what());
      continue;
    }
    TurnJob job;
    job.prompt = prompt;
    job.background = true;
    job.emit = [](TurnEvent&&) {};  // nobody reads the token
    // One greedy token: the prompt is what is wanted, and its blocks are published when the turn ends.
    job.options.max_tokens = 1;
    job.options.sampling.temperature = 0;
    job.options.tools = r.tools;
    job.options.cache_salt = warm_salt(s);
    job.runnable = [&s] { return !s.shutting_down.load(); };
    const std::string path = w.path.string();
    job.done = [&s, path](TurnResult result, std::exception_ptr error) {
      if (error || result.finish == TurnFinish::Cancelled) {
        std::string why = "cancelled (the server is stopping)";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          why = e.what();
        }
        std::fprintf(stderr, "keel serve: --warm %s: %s\n", path.c_str(), log_safe(why, 500).c_str());
        ++s.warmup.failed;
        return;
      }
      s.kv_tokens = s.session.live_tokens();
      s.warmup.prompt_tokens += result.stats.prompt_tokens;
      s.warmup.reused_tokens += result.stats.reused_tokens;
      ++s.warmup.done;
      std::fprintf(stderr, "keel serve: --warm %s: %lld prompt tokens prefilled (%lld were cached)\n", path.c_str(),
                   static_cast<long long>(result.stats.prompt_tokens), static_cast<long long>(result.stats.reused_tokens));
    };
    if (!s.scheduler.submit(std::move(job))) fail(s, w, "the queue is full");
  }
}

}  // namespace keel::api
