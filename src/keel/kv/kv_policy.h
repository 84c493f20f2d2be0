#pragma once
// The runtime precision policy: which KV format each token's block needs, from the token's role and
// position. The presets (keel/kv/kv_presets.h) are the names users pick; this is what they mean at
// run time, plus explicit specs such as
//   "tools=bf16 system=bf16 sink=4 recent=256 tool_call=int8 default=int4"
//
// Grammar (words separated by spaces or commas, each at most once):
//   <role>=<format>    role: scaffolding system tools user assistant tool_call tool_result reasoning
//   default=<format>   roles not named (bf16 when absent)
//   sink=<n>           the first n tokens are bf16 whatever their role (attention sinks)
//   recent=<n>         blocks holding any of the last n tokens are read at full precision
//   layers<N=<forms>   in the first N layers (0 .. N-1) keys and/or values are kept at least this
//                      precise, whatever their block's format; forms: k:F, v:F, k:F/v:G, or F
//                      (both); e.g. "layers<2=k:bf16" keeps the two earliest layers' keys bf16
//   format: bf16 int8 int4 int2
// A block (keel/kv/kv_window.h) takes the most precise format any of its tokens needs; the layer
// term then raises (never lowers) the format of the early layers' K or V rows of that block.
//
// A value type: immutable once built, safe to read from any thread.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "keel/chat/chat_roles.h"
#include "keel/kv/kv_format_cost.h"
#include "keel/kv/kv_presets.h"

namespace keel::kv {

class KvPolicy {
 public:
  KvPolicy();  // everything bf16: the `full` preset

  // A concrete preset; `auto` throws keel::Error (the caller resolves it with the planner first).
  static KvPolicy preset(KvPreset preset);
  // A preset name (full, int8, int4, protect) or an explicit spec; keel::Error names the bad word.
  static KvPolicy parse(std::string_view text);

  KvFormat role_format(chat::Role role) const { return formats_[static_cast<size_t>(role)]; }
  KvFormat default_format() const { return default_; }
  int64_t sink() const { return sink_; }
  int64_t recent() const { return recent_; }

  // The format the token at `pos` needs: bf16 for sinks, else its role's.
  KvFormat token_format(chat::Role role, int64_t pos) const;
  // The most precise format the tokens at [first_pos, first_pos + roles.size()) need.
  KvFormat block_format(std::span<const chat::Role> roles, int64_t first_pos) const;
  // True when some token may be stored below bf16 (the pool then needs head_dim % 32 == 0).
  bool quantizes() const;

  // The layer term: layers [0, layer_split()) keep keys at least layer_key_floor() and values at
  // least layer_value_floor() precise (KvFormat::Int2, the least precise format, when that side is
  // not named). layer_split() == 0: no term.
  int64_t layer_split() const { return layers_below_; }
  KvFormat layer_key_floor() const { return layer_k_; }
  KvFormat layer_value_floor() const { return layer_v_; }
  // What a block whose tokens need `block` stores the K and V rows of `layer` in.
  KvRowForms row_forms(int64_t layer, KvFormat block) const;

  KvPolicy with_recent(int64_t recent) const;
  KvPolicy with_sink(int64_t sink) const;

  // Canonical spec: roles that differ from the default (in role order), then the layer term
  // (layers<N=k:F/v:G, or layers<N=F when both are named alike), sink, recent, default.
  // parse(describe()) == *this, and equal policies describe identically.
  std::string describe() const;

  bool operator==(const KvPolicy&) const = default;

 private:
  std::array<KvFormat, chat::kRoleCount> formats_;
  KvFormat default_ = KvFormat::BF16;
  int64_t sink_ = 0;
  int64_t recent_ = 0;
  int64_t layers_below_ = 0;
  KvFormat layer_k_ = KvFormat::Int2;
  KvFormat layer_v_ = KvFormat::Int2;
};

// Of two formats, the one that keeps more bits (the one that costs more bytes per vector).
KvFormat more_precise(KvFormat a, KvFormat b);

}  // namespace keel::kv
