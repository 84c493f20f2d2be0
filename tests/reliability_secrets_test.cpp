// Secrets and isolation in keel serve: API keys from the flag, the environment or a file, each
// compared in constant time; no absolute paths for callers without a key; and, with several keys,
// one prefix-cache namespace per key, so one key's holder cannot read another's prompts token by
// token from cache_read_input_tokens. Reuse within a key, or with one key or none, is unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "keel/api/http_access.h"
#include "keel/arch/model_loader.h"
#include "keel/arch/transformer.h"
#include "keel/engine/forward_loop.h"
#include "keel/kv/kv_block_hash.h"
#include "keel/kv/kv_pool.h"
#include "keel/model/weights.h"
#include "keel/util/error.h"
#include "keel/util/thread_pool.h"
#include "server_support.h"

namespace keel::test {
namespace {

using json = nlohmann::ordered_json;
using chat::Role;

http::Request request_with(std::vector<std::pair<std::string, std::string>> headers) {
  http::Request req;
  req.headers = std::move(headers);
  return req;
}

TEST(ReliabilitySecrets, PresentedKeyNamesWhichKey) {
  const api::AccessRules rules(api::AccessOptions{"127.0.0.1", {}, {}, {"alpha-key", "beta-key"}});
  EXPECT_EQ(rules.key_count(), 2u);
  EXPECT_EQ(rules.presented_key(request_with({{"x-api-key", "alpha-key"}})), std::optional<size_t>(0));
  EXPECT_EQ(rules.presented_key(request_with({{"Authorization", "Bearer beta-key"}})), std::optional<size_t>(1));
  EXPECT_EQ(rules.presented_key(request_with({{"x-api-key", "wrong"}, {"Authorization", "Bearer beta-key"}})),
            std::optional<size_t>(1));
  for (const char* wrong : {"", "alpha", "alpha-key ", "beta-keyx", "Alpha-key", "alpha-key,beta-key"}) {
    EXPECT_FALSE(rules.presented_key(request_with({{"x-api-key", wrong}}))) << wrong;
    EXPECT_FALSE(rules.presented_key(request_with({{"Authorization", std::string("Bearer ") + wrong}}))) << wrong;
  }
  EXPECT_FALSE(rules.presented_key(request_with({})));
  const api::AccessRules open(api::AccessOptions{"127.0.0.1", {}, {}, {}});
  EXPECT_FALSE(open.key_required());
  EXPECT_FALSE(open.presented_key(request_with({{"x-api-key", ""}})));
  // A key no header could carry would lock every client out: refused when the server starts.
  for (const std::string& bad : {std::string(), std::string("two words"), std::string("tab\tkey"), std::string("nl\n")})
    EXPECT_THROW(api::AccessRules(api::AccessOptions{"127.0.0.1", {}, {}, {"fine", bad}}), Error) << bad;
}

// --- The pool: a salt is a namespace -------------------------------------------------------------

TEST(ReliabilitySecrets, SaltedRootsAreDistinct) {
  const uint64_t root = kv::kv_chain_root("full", true);
  EXPECT_EQ(kv::kv_salted_root(root, 0), root);  // salt 0: the chain every pool had before salts
  std::set<uint64_t> roots{root};
  for (uint64_t salt = 1; salt <= 1000; ++salt) roots.insert(kv::kv_salted_root(root, salt));
  EXPECT_EQ(roots.size(), 1001u);
}

struct Conversation {
  std::vector<int32_t> ids;
  std::vector<Role> roles;
};

std::vector<float> run_rest(Transformer& model, kv::KvSequence& seq, const Conversation& c) {
  std::vector<float> logits(static_cast<size_t>(model.spec().vocab_size));
  const auto at = static_cast<size_t>(seq.size());
  const auto ids = std::span<const int32_t>(c.ids).subspan(at);
  const int64_t row = static_cast<int64_t>(ids.size()) - 1;
  forward_tokens(model, seq, ids, std::span<const Role>(c.roles).subspan(at), std::span<const int64_t>(&row, 1), logits);
  return logits;
}

TEST(ReliabilitySecrets, PoolReusesBlocksOnlyUnderTheirOwnSalt) {
  const ModelWeights weights = arch::load_model(shared_dir() / "models" / "tiny-toolcaller");
  ThreadPool threads{2};
  Transformer model(weights, threads);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(weights.spec.vocab_size - 1));
  Conversation c;
  for (int i = 0; i < 100; ++i) {
    c.ids.push_back(token(rng));
    c.roles.push_back(i < 40 ? Role::system : Role::user);
  }
  const int64_t budget = int64_t{64} << 20;
  for (const char* policy : {"full", "int8", "protect"}) {
    SCOPED_TRACE(policy);
    // What an unsalted pool reuses of the same history: a salt must change nothing within itself.
    int64_t plain_reuse = 0;
    {
      kv::KvPool plain(weights.spec, budget, kv::KvPolicy::parse(policy), true);
      auto seq = plain.open(c.ids, c.roles);
      run_rest(model, *seq, c);
      seq->publish();
      plain_reuse = plain.open(c.ids, c.roles)->size();
    }
    if (std::string(policy) == "full") { EXPECT_EQ(plain_reuse, 96); }  // every whole block before the last token
    ASSERT_GT(plain_reuse, 0);

    kv::KvPool pool(weights.spec, budget, kv::KvPolicy::parse(policy), true);
    std::vector<float> fresh;
    {
      auto seq = pool.open(c.ids, c.roles, 1);
      ASSERT_EQ(seq->size(), 0);
      fresh = run_rest(model, *seq, c);
      seq->publish();
    }
    EXPECT_EQ(pool.open(c.ids, c.roles, 2)->size(), 0) << "salt 2 reused salt 1's blocks";
    EXPECT_EQ(pool.open(c.ids, c.roles)->size(), 0) << "the unsalted namespace reused salt 1's blocks";
    auto again = pool.open(c.ids, c.roles, 1);
    EXPECT_EQ(again->size(), plain_reuse);
    EXPECT_EQ(again->cache_salt(), 1u);
    const std::vector<float> reused = run_rest(model, *again, c);
    ASSERT_EQ(reused.size(), fresh.size());
    EXPECT_EQ(std::memcmp(reused.data(), fresh.data(), fresh.size() * sizeof(float)), 0)
        << "reuse under a salt is not bit-identical to a fresh prefill";
    again->publish();
    again.reset();
    // The same content published under another salt is a block of its own, not a merge.
    const int64_t cached = pool.stats().blocks_cached;
    {
      auto other = pool.open(c.ids, c.roles, 2);
      ASSERT_EQ(other->size(), 0);
      run_rest(model, *other, c);
      other->publish();
    }
    EXPECT_EQ(pool.stats().blocks_cached, cached + 6);
    EXPECT_EQ(pool.open(c.ids, c.roles, 2)->size(), plain_reuse);
  }
}

// --- A served model: one namespace per key --------------------------------------------------------

json long_request() {
  return {{"model", "tiny-toolcaller"},
          {"max_tokens", 2},
          {"messages", json::array({{{"role", "user"}, {"content", prose(200)}}})}};
}

// cache_read_input_tokens of one turn of long_request() under `key` (none when empty).
int64_t cached_tokens(httplib::Client& client, const std::string& key, bool bearer = false) {
  httplib::Headers headers;
  if (!key.empty()) headers.emplace(bearer ? "Authorization" : "x-api-key", bearer ? "Bearer " + key : key);
  const JsonResponse res = post_json(client, "/v1/messages", long_request(), headers);
  EXPECT_EQ(res.status, 200) << res.text;
  if (res.status != 200) return -1;
  return res.body["usage"]["cache_read_input_tokens"].get<int64_t>();
}

TEST(ReliabilitySecrets, EachKeyHasItsOwnPrefixCache) {
  ServerProcess server({"--api-key", "alpha-key,beta-key"});
  auto client = server.client();
  EXPECT_EQ(cached_tokens(client, "alpha-key"), 0);
  EXPECT_GT(cached_tokens(client, "alpha-key"), 100) << "a key's own prompt is reused";
  // beta's turn comes right after alpha's: neither alpha's live sequence nor its cached blocks count.
  EXPECT_EQ(cached_tokens(client, "beta-key"), 0) << "beta read alpha's prefix cache";
  EXPECT_GT(cached_tokens(client, "beta-key", /*bearer=*/true), 100) << "either header names the same namespace";
  // alpha's blocks stayed in the pool while beta ran, and are still alpha's alone.
  EXPECT_GT(cached_tokens(client, "alpha-key", /*bearer=*/true), 100);
  // The same in OpenAI's shape.
  json openai = long_request();
  openai["messages"][0]["content"] = prose(150) + " Now for something else.";
  const JsonResponse first = post_json(client, "/v1/chat/completions", openai, {{"x-api-key", "beta-key"}});
  ASSERT_EQ(first.status, 200) << first.text;
  const JsonResponse other = post_json(client, "/v1/chat/completions", openai, {{"x-api-key", "alpha-key"}});
  ASSERT_EQ(other.status, 200) << other.text;
  // alpha shares the first 150 tokens' worth of prose with its own earlier prompt, not beta's suffix.
  const int64_t alpha_cached = other.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  const JsonResponse again = post_json(client, "/v1/chat/completions", openai, {{"x-api-key", "beta-key"}});
  ASSERT_EQ(again.status, 200) << again.text;
  const int64_t beta_cached = again.body["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(beta_cached, alpha_cached) << "beta's whole prompt was cached under beta only";
  EXPECT_NE(server.log().find("2 API keys accepted"), std::string::npos) << server.log();
}

TEST(ReliabilitySecrets, OneKeyOrNoneSharesOneCacheAsBefore) {
  {
    ServerProcess server({"--api-key", "only-key"});
    auto client = server.client();
    EXPECT_EQ(cached_tokens(client, "only-key"), 0);
    EXPECT_GT(cached_tokens(client, "only-key", /*bearer=*/true), 100);
  }
  {
    // The same key twice is one key, so one namespace.
    ServerProcess server({"--api-key", "only-key", "--api-key", "only-key"});
    auto client = server.client();
    EXPECT_EQ(cached_tokens(client, "only-key"), 0);
    EXPECT_GT(cached_tokens(client, "only-key"), 100);
    EXPECT_NE(server.log().find("API key required"), std::string::npos) << server.log();
  }
  ServerProcess server;
  auto client = server.client();
  EXPECT_EQ(cached_tokens(client, ""), 0);
  EXPECT_GT(cached_tokens(client, ""), 100);
  // Any key a client sends to a server without keys changes nothing.
  EXPECT_GT(cached_tokens(client, "whatever"), 100);
}

// --- Where keys come from --------------------------------------------------------------------------

int status_with_key(httplib::Client& client, const std::string& key) {
  auto res = client.Get("/v1/models", {{"x-api-key", key}});
  return res ? res->status : -1;
}

TEST(ReliabilitySecrets, KeysFromTheEnvironment) {
  ServerProcess server({}, {"KEEL_API_KEY=env-one, env-two"});
  auto client = server.client();
  EXPECT_EQ(status_with_key(client, "env-one"), 200);
  EXPECT_EQ(status_with_key(client, "env-two"), 200);
  EXPECT_EQ(status_with_key(client, "env-one, env-two"), 401);
  EXPECT_EQ(status_with_key(client, "wrong"), 401);
  const std::string log = server.log();
  EXPECT_NE(log.find("2 API keys accepted"), std::string::npos) << log;
  EXPECT_EQ(log.find("process list"), std::string::npos) << "only --api-key on the command line is visible:\n" << log;
  EXPECT_EQ(log.find("env-one"), std::string::npos) << "a key was logged:\n" << log;
  // A flag wins over the environment.
  ServerProcess flagged({"--api-key", "flag-key"}, {"KEEL_API_KEY=env-one"});
  auto flagged_client = flagged.client();
  EXPECT_EQ(status_with_key(flagged_client, "flag-key"), 200);
  EXPECT_EQ(status_with_key(flagged_client, "env-one"), 401);
  EXPECT_NE(flagged.log().find("--api-key is visible to other users in the process list"), std::string::npos)
      << flagged.log();
}

// An empty key is a mistake (`--api-key "$UNSET"`), not a wish to run open: the start fails and
// says so, for every way an empty key can be written.
TEST(ReliabilitySecrets, AnEmptyKeyFailsTheStart) {
  const std::string serve = "timeout 60 " + keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string();
  const struct {
    std::string command, message;
  } cases[] = {
      {serve + " --api-key ''", "--api-key: an empty key"},
      {serve + " --api-key=", "--api-key: an empty key"},
      {serve + " --api-key ' '", "--api-key: an empty key"},
      {serve + " --api-key ','", "--api-key: an empty key"},
      {serve + " --api-key 'one,,two'", "--api-key: an empty key"},
      {serve + " --api-key one --api-key ''", "--api-key: an empty key"},
      {"KEEL_API_KEY= " + serve, "KEEL_API_KEY: an empty key"},
      {"KEEL_API_KEY=' , ' " + serve, "KEEL_API_KEY: an empty key"},
      {"KEEL_API_KEY_FILE= " + serve, "KEEL_API_KEY_FILE: set but empty"},
  };
  for (const auto& c : cases) {
    const CommandResult r = run_command(c.command);
    EXPECT_EQ(r.exit_code, 1) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find("keel serve: error: " + c.message), std::string::npos) << c.command << "\n" << r.output;
    EXPECT_EQ(r.output.find("listening"), std::string::npos) << c.command << "\n" << r.output;
  }
}

TEST(ReliabilitySecrets, KeysFromAFile) {
  TempDir dir;
  const auto file = dir.path() / "keys";
  {
    std::ofstream out(file);
    out << "# keel serve keys\n\n  file-one  \r\nfile-two\n#file-three\n";
  }
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  {
    ServerProcess server({"--api-key-file", file.string(), "--api-key", "flag-key"});
    auto client = server.client();
    for (const char* key : {"file-one", "file-two", "flag-key"}) EXPECT_EQ(status_with_key(client, key), 200) << key;
    for (const char* key : {"#file-three", "file-three", "# keel serve keys", "file-onefile-two", "file"})
      EXPECT_EQ(status_with_key(client, key), 401) << key;
    const std::string log = server.log();
    EXPECT_NE(log.find("3 API keys accepted"), std::string::npos) << log;
    EXPECT_EQ(log.find("readable by other users"), std::string::npos) << log;
    EXPECT_EQ(log.find("file-one"), std::string::npos) << "a key was logged:\n" << log;
  }
  {
    // KEEL_API_KEY_FILE, and a file others may read is served with a warning.
    std::filesystem::permissions(file, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
    ServerProcess server({}, {"KEEL_API_KEY_FILE=" + file.string()});
    auto client = server.client();
    EXPECT_EQ(status_with_key(client, "file-two"), 200);
    EXPECT_EQ(status_with_key(client, ""), 401);
    EXPECT_NE(server.log().find("readable by other users"), std::string::npos) << server.log();
  }
  const std::string serve = keel_binary().string() + " serve --model " + tiny_toolcaller_dir().string() + " --port 0";
  const CommandResult missing = run_command(serve + " --api-key-file " + (dir.path() / "absent").string());
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("--api-key-file: cannot read"), std::string::npos) << missing.output;
  const auto empty = dir.path() / "empty";
  std::ofstream(empty) << "# nothing here\n\n";
  const CommandResult none = run_command(serve + " --api-key-file " + empty.string());
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_NE(none.output.find("holds no key"), std::string::npos) << none.output;
  EXPECT_EQ(none.output.find("listening"), std::string::npos) << none.output;
  const CommandResult spaced = run_command(serve + " --api-key 'two words'");
  EXPECT_EQ(spaced.exit_code, 1) << spaced.output;
  EXPECT_NE(spaced.output.find("API key must be printable ASCII"), std::string::npos) << spaced.output;
}

// --- No paths for callers without a key -------------------------------------------------------------

TEST(ReliabilitySecrets, NoPathsWithoutTheKey) {
  const std::string full = std::filesystem::canonical(tiny_toolcaller_dir()).string();
  const std::string parent = std::filesystem::canonical(tiny_toolcaller_dir().parent_path()).string();
  ServerProcess server({"--api-key", "sekret,other-key", "--max-body-mb", "1"});
  auto client = server.client();
  std::vector<std::pair<std::string, std::string>> answers;  // what, headers and body
  auto keep = [&](const std::string& what, const httplib::Result& res) {
    ASSERT_TRUE(res) << what;
    std::string text = std::to_string(res->status) + "\n";
    for (const auto& [name, value] : res->headers) text += name + ": " + value + "\n";
    answers.push_back({what, text + res->body});
  };
  keep("health", client.Get("/health"));
  keep("health, wrong key", client.Get("/health", {{"x-api-key", "sekre"}}));
  keep("hello", client.Get("/api/hello"));
  keep("HEAD hello", client.Head("/api/hello"));
  keep("models", client.Get("/v1/models"));
  keep("model", client.Get("/v1/models/tiny-toolcaller"));
  keep("metrics", client.Get("/metrics"));
  keep("unknown route", client.Get("/nothing/here"));
  keep("messages", client.Post("/v1/messages", long_request().dump(), "application/json"));
  keep("chat", client.Post("/v1/chat/completions", long_request().dump(), "application/json"));
  keep("count_tokens", client.Post("/v1/messages/count_tokens", long_request().dump(), "application/json"));
  keep("bad json", client.Post("/v1/messages", "{", "application/json"));
  keep("too large", client.Post("/v1/messages", std::string(2u << 20, 'x'), "application/json"));
  keep("OPTIONS", client.Options("/v1/messages"));
  keep("foreign origin", client.Get("/health", {{"Origin", "http://evil.example"}}));
  keep("foreign host", client.Get("/health", {{"Host", "evil.example"}}));
  const RawResponse garbage = raw_request(server.port(), "NOT A REQUEST\r\n\r\n");
  std::string garbage_text = std::to_string(garbage.status) + "\n" + garbage.body;
  for (const auto& [name, value] : garbage.headers) garbage_text += name + ": " + value + "\n";
  answers.push_back({"unparsable", garbage_text});
  for (const auto& [what, text] : answers) {
    EXPECT_EQ(text.find(parent), std::string::npos) << what << ":\n" << text;
    EXPECT_EQ(text.find(tiny_toolcaller_dir().parent_path().string()), std::string::npos) << what << ":\n" << text;
  }
  EXPECT_EQ(answers[0].second.substr(0, 4), "200\n");
  EXPECT_EQ(answers[6].second.substr(0, 4), "401\n");  // /metrics needs a key
  // Either key holder does get the path: the checks above look for what is really there.
  for (const char* key : {"sekret", "other-key"}) {
    auto holder = client.Get("/health", {{"x-api-key", key}});
    ASSERT_TRUE(holder);
    EXPECT_EQ(json::parse(holder->body)["path"], full) << key;
    EXPECT_EQ(holder->get_header_value("x-keel-model"), full) << key;
  }
}

}  // namespace
}  // namespace keel::test
