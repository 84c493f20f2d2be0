#include <algorithm>

#include "keel/arch/family.h"

namespace keel::arch {

// One line per family; each is defined in its own file (llama.cpp, qwen2.cpp, ...).
extern const Family kLlama, kMistral, kQwen2, kQwen3, kQwen3Moe, kQwen3Next, kGptOss, kGemma3Text, kGemma4Text;

namespace {
constexpr const Family* kFamilies[] = {&kLlama, &kMistral, &kQwen2, &kQwen3, &kQwen3Moe, &kQwen3Next, &kGptOss, &kGemma3Text, &kGemma4Text};
}  // namespace

std::span<const Family* const> families() { return kFamilies; }

const Family* find_family(std::string_view model_type) {
  for (const Family* f : kFamilies)
    if (f->model_type == model_type) return f;
  return nullptr;
}

const Family* find_gguf_family(std::string_view architecture) {
  for (const Family* f : kFamilies)
    if (f->gguf_tensor_names && f->gguf_architecture == architecture) return f;
  return nullptr;
}

std::string gguf_architecture_list() {
  std::vector<std::string_view> names;
  for (const Family* f : kFamilies)
    if (f->gguf_tensor_names) names.push_back(f->gguf_architecture);
  std::sort(names.begin(), names.end());
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

TensorNames ggml_tensor_names() {
  TensorNames n;
  n.embed = "token_embd";
  n.final_norm = "output_norm";
  n.lm_head = "output";
  n.layer_prefix = "blk.";
  n.attn_norm = "attn_norm";
  n.ffn_norm = "ffn_norm";
  n.q = "attn_q", n.k = "attn_k", n.v = "attn_v", n.o = "attn_output";
  n.q_norm = "attn_q_norm", n.k_norm = "attn_k_norm";
  n.gate = "ffn_gate", n.up = "ffn_up", n.down = "ffn_down";
  // Experts are stacked (experts, rows, cols) under blk.N.ffn_{gate,up,down}_exps.
  n.router = "ffn_gate_inp";
  n.stacked_experts = "";
  n.expert_gate = "ffn_gate_exps", n.expert_up = "ffn_up_exps", n.expert_down = "ffn_down_exps";
  n.attention_sinks = "attn_sinks.weight";
  return n;
}

std::string family_list() {
  std::vector<std::string_view> names;
  for (const Family* f : kFamilies) names.push_back(f->model_type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (auto n : names) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace keel::arch
