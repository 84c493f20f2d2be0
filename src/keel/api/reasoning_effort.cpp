// Request effort words and thinking budgets as the reasoning levels templates with a
// `reasoning_effort` variable understand (chat_request.h says which maps to which). gpt-oss was
// trained on exactly three ("Reasoning: low|medium|high"), so every word lands on one of them
// rather than reaching the prompt verbatim.
#include "keel/api/chat_request.h"

namespace keel::api {

std::optional<std::string> effort_level_for_effort(std::string_view effort) {
  if (effort == "none" || effort == "minimal" || effort == "low") return "low";
  if (effort == "medium") return "medium";
  if (effort == "high" || effort == "xhigh" || effort == "max") return "high";
  return std::nullopt;
}

std::string effort_level_for_budget(int64_t budget_tokens) {
  // Boundaries between the budgets the levels stand for (low 2048, medium 8192, high 24576), so
  // a budget maps back to a level whose budget is near it.
  if (budget_tokens < 4096) return "low";
  if (budget_tokens < 16384) return "medium";
  return "high";
}

}  // namespace keel::api
