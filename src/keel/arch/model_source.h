#pragma once
// What --model names, resolved once. keel serve, run, bench, eval, plan, render and tokenize each
// resolve their --model here at start-up and pass the one ModelSource on: to the loader
// (model_loader.h), the text side (engine/model_text.h), the planner and the KV disk tier's
// identity. So a path is classified in one place, a GGUF header is parsed once, and keel plan and
// keel serve read the same config and render with the same chat template.
// A plain value, immutable once resolved (copies share the mapped GGUF shards): any thread.
#include <filesystem>
#include <optional>
#include <string>

#include "keel/chat/template_files.h"
#include "keel/model/config_view.h"
#include "keel/model/model_files.h"

namespace keel::arch {

struct ModelSource {
  ModelFiles files;
  ConfigView config;  // config.json, or a GGUF's metadata read as one (gguf_model.h's gguf_config)
  // The one template keel renders every request with, and reads the tool-call format from: a named
  // "tool_use" variant where the model has one, else its default. nullopt when the model has none
  // (a folder with only config.json, as keel plan may be given).
  std::optional<chat::ChatTemplateSource> chat_template;

  bool is_gguf() const { return files.is_gguf(); }
  // The name keel serve answers to: the folder's name, or the GGUF file's without ".gguf" and
  // without a split model's "-00001-of-00003".
  std::string name() const;
  // Throws keel::Error naming the model when it has no chat template.
  const chat::ChatTemplateSource& require_chat_template() const;
};

// find_model_files(model), then its config and chat template. Throws keel::Error naming the file
// and key of anything unreadable; a GGUF of an architecture keel has no family for.
ModelSource resolve_model(const std::filesystem::path& model);

}  // namespace keel::arch
