#pragma once
// The plan for tools (`keel plan --json`): every number in bytes or tokens, every verdict as a
// field, nothing a script would have to parse out of a sentence.
// A pure function of the Plan: any thread.
#include <nlohmann/json.hpp>

#include "keel/plan/planner.h"

namespace keel::plan {

nlohmann::json plan_to_json(const Plan& plan);

}  // namespace keel::plan
