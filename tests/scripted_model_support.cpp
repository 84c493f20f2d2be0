#include "scripted_model_support.h"

#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "client_support.h"
#include "keel/text/tokenizer.h"

namespace keel::test {
namespace {

using json = nlohmann::json;

uint16_t bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);  // round to nearest even
}

// Spells text[pos...] with vocabulary tokens none of which is in `used` or used twice, longest
// pieces first, backtracking when a choice leaves the rest unspellable.
bool spell(const text::Tokenizer& tok, const std::string& text, size_t pos, std::set<int32_t>& used,
           std::vector<int32_t>& out) {
  if (pos == text.size()) return true;
  for (size_t len = std::min<size_t>(24, text.size() - pos); len > 0; --len) {
    const std::string piece = text.substr(pos, len);
    const std::vector<int32_t> ids = tok.encode(piece);
    if (ids.size() != 1 || used.count(ids[0]) || tok.decode(ids) != piece) continue;
    used.insert(ids[0]);
    out.push_back(ids[0]);
    if (spell(tok, text, pos + len, used, out)) return true;
    out.pop_back();
    used.erase(ids[0]);
  }
  return false;
}

// The ids spelling `text`, each used once across calls (a token can have only one successor).
std::vector<int32_t> distinct_ids(const text::Tokenizer& tok, const std::string& text, std::set<int32_t>& used) {
  std::vector<int32_t> out;
  if (text.empty() || !spell(tok, text, 0, used, out))
    throw std::runtime_error("scripted model: cannot spell \"" + text + "\" with tokens used once each");
  return out;
}

// Overwrites bf16 tensors of a safetensors file in place.
class TensorPatcher {
 public:
  explicit TensorPatcher(const std::filesystem::path& file) : f_(file, std::ios::in | std::ios::out | std::ios::binary) {
    uint64_t header_len = 0;
    f_.read(reinterpret_cast<char*>(&header_len), 8);
    std::string header(header_len, '\0');
    f_.read(header.data(), static_cast<std::streamsize>(header_len));
    header_ = json::parse(header);
    data_ = 8 + header_len;
  }
  // Writes `values` at [row, 0...] of a 2-D tensor (or at [0...] of a 1-D one).
  void write(const std::string& name, int64_t row, const std::vector<float>& values) {
    const json& t = header_.at(name);
    if (t["dtype"] != "BF16") throw std::runtime_error("scripted model: " + name + " is not BF16");
    const int64_t width = t["shape"].size() == 2 ? t["shape"][1].get<int64_t>() : t["shape"][0].get<int64_t>();
    std::vector<uint16_t> out;
    for (float v : values) out.push_back(bf16(v));
    f_.seekp(static_cast<std::streamoff>(data_ + t["data_offsets"][0].get<uint64_t>() + 2 * row * width));
    f_.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(2 * out.size()));
    if (!f_) throw std::runtime_error("scripted model: cannot write " + name);
  }
  int64_t rows(const std::string& name) const { return header_.at(name)["shape"][0].get<int64_t>(); }
  int64_t width(const std::string& name) const { return header_.at(name)["shape"].back().get<int64_t>(); }

 private:
  std::fstream f_;
  json header_;
  uint64_t data_ = 0;
};

}  // namespace

std::filesystem::path write_scripted_model(const TempDir& tmp, const std::string& first, const std::string& after_tool) {
  const auto cfg_dir = tmp.path() / "scripted-config";
  const auto dir = tmp.path() / "qwen25-scripted";
  std::filesystem::create_directories(cfg_dir);
  const json config = {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"hidden_act", "silu"},
                       {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 1},
                       {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                       {"max_position_embeddings", kScriptedModelContext}, {"rms_norm_eps", 1e-6},
                       {"rope_theta", 1000000.0}, {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"},
                       {"use_sliding_window", false}, {"vocab_size", 151936}, {"bos_token_id", 151643},
                       {"eos_token_id", 151645}};
  std::ofstream(cfg_dir / "config.json") << config.dump(2);
  const ProcessResult synth =
      run_process({keel_binary().string(), "synth", "--config", (cfg_dir / "config.json").string(), "--out", dir.string()},
                  current_environment(), tmp.path(), std::chrono::seconds(120));
  if (synth.exit_code != 0) throw std::runtime_error("keel synth failed:\n" + synth.out + synth.err);
  const auto tokenizer_dir = shared_dir() / "fixtures" / "tokenizers" / "qwen2.5";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) std::filesystem::copy_file(tokenizer_dir / f, dir / f);

  const text::Tokenizer tok = text::Tokenizer::from_file(dir);
  auto single = [&](const std::string& text) {
    const std::vector<int32_t> ids = tok.encode(text);
    if (ids.size() != 1) throw std::runtime_error("scripted model: \"" + text + "\" is not one token");
    return ids[0];
  };
  // Qwen2.5's template wraps a tool result in <tool_response>...</tool_response>, which this
  // tokenizer spells "<" "tool" "_response" ">": the "_response" token marks a tool result.
  const int32_t tool_response = tok.encode("<tool_response>").at(2);
  if (tok.decode(std::vector<int32_t>{tool_response}) != "_response")
    throw std::runtime_error("scripted model: the tokenizer does not spell <tool_response> as expected");
  const int32_t newline = single("\n"), im_end = single("<|im_end|>");
  std::set<int32_t> used = {newline, tool_response, im_end};
  const std::vector<int32_t> script_a = distinct_ids(tok, first, used);
  const std::vector<int32_t> script_b = distinct_ids(tok, after_tool, used);

  // Directions: 0 every other token, 1 "\n", 2 <tool_response>, 3 what attention writes after a
  // tool result, 4 <|im_end|>'s own, then one per script token.
  constexpr int kDefault = 0, kNewline = 1, kToolResponse = 2, kAfterTool = 3, kEnd = 4;
  TensorPatcher p(dir / "model.safetensors");
  const std::string emb = "model.embed_tokens.weight";
  const int64_t hidden = p.width(emb);
  const int64_t dims = 5 + static_cast<int64_t>(script_a.size() + script_b.size());
  if (dims > hidden) throw std::runtime_error("scripted model: the scripts need " + std::to_string(dims) + " directions");
  std::vector<std::vector<float>> rows(static_cast<size_t>(p.rows(emb)));
  auto direction = [&](int32_t token, int dim, float scale) {
    auto& r = rows[static_cast<size_t>(token)];
    if (r.empty()) r.assign(static_cast<size_t>(dims), 0.0f);
    r[static_cast<size_t>(dim)] += scale;
  };
  direction(newline, kNewline, 3.0f);
  direction(tool_response, kToolResponse, 5.0f);
  int next_dim = 5;
  float largest = 0;
  std::vector<std::pair<int, float>> ends;  // the last script tokens' directions and scales
  for (const auto* script : {&script_a, &script_b}) {
    int previous = script == &script_a ? kNewline : kAfterTool;
    float scale = 10.0f;
    for (int32_t token : *script) {
      direction(token, next_dim, scale);
      direction(token, previous, scale);
      previous = next_dim++;
      largest = std::max(largest, scale);
      scale *= 3.0f;
    }
    ends.push_back({previous, scale / 3.0f});
  }
  // <|im_end|> follows the last token of either script.
  for (const auto& [dim, scale] : ends) direction(im_end, dim, 3.0f * largest);
  direction(im_end, kEnd, 3.0f * largest);
  for (int64_t t = 0; t < static_cast<int64_t>(rows.size()); ++t) {
    std::vector<float> r = rows[static_cast<size_t>(t)];
    if (r.empty()) {
      r.assign(static_cast<size_t>(dims), 0.0f);
      r[kDefault] = 1.0f;
    }
    p.write(emb, t, r);
  }
  // The final norm keeps the script's directions only; the input norm passes everything as is.
  std::vector<float> keep(static_cast<size_t>(hidden), 0.0f), ones(static_cast<size_t>(hidden), 1.0f);
  std::fill(keep.begin(), keep.begin() + dims, 1.0f);
  p.write("model.norm.weight", 0, keep);
  p.write("model.layers.0.input_layernorm.weight", 0, ones);
  // Attention head 0 (key/value head 0), head dims 7 and 15: rope's slowest pair, which turns by
  // 5.6e-6 rad a position, so the score barely depends on distance. A "\n" query (normed: 8 on
  // direction 1) meets a <tool_response> key (8 on direction 2): score 8 * 1.6 * 8 * 1.6 / 4 = 41,
  // against ~0 for every other key, so the head reads <tool_response> tokens only; their value
  // (8 * 5 on head dim 0) goes to direction kAfterTool times 25: 1000, against "\n"'s 3.
  p.write("model.layers.0.self_attn.q_proj.weight", 7, {0.0f, 1.6f});
  p.write("model.layers.0.self_attn.k_proj.weight", 7, {0.0f, 0.0f, 1.6f});
  p.write("model.layers.0.self_attn.v_proj.weight", 0, {0.0f, 0.0f, 5.0f});
  // Nothing else the layer writes may reach the script's directions: scaled by embeddings that
  // grow to ~1e8, even the random weights' 1e-3 would outvote the script. So the rows of o_proj
  // and of the MLP's down_proj that write them are zero, but for the one entry above.
  const std::string o_proj = "model.layers.0.self_attn.o_proj.weight", down = "model.layers.0.mlp.down_proj.weight";
  for (int d = 0; d < dims; ++d) {
    std::vector<float> o_row(static_cast<size_t>(p.width(o_proj)), 0.0f);
    if (d == kAfterTool) o_row[0] = 25.0f;
    p.write(o_proj, d, o_row);
    p.write(down, d, std::vector<float>(static_cast<size_t>(p.width(down)), 0.0f));
  }
  return dir;
}

}  // namespace keel::test
