#pragma once
// The KV policies an eval compares, from the --policies flag: preset names (full, int8, int4,
// protect), `int2` as shorthand for the spec "default=int2", and explicit specs. Commas separate
// arms, but a spec's own words may be comma-separated too ("full,int4,default=int2,recent=0" is
// three arms: words with '=' that follow each other form one spec); ';' always separates arms.
// "NAME: SPEC" gives an arm a name for the reports ("k8: system=bf16 layers<4=k:int8 default=int4").
//
// Threads: pure functions returning plain values: any thread.
#include <string>
#include <string_view>
#include <vector>

#include "keel/kv/kv_policy.h"

namespace keel::eval {

struct PolicyArm {
  std::string label;  // its name, else what the user wrote (normalised spacing): used in reports
  kv::KvPolicy policy;
};

// Throws keel::Error for an empty list, a bad policy, or a label given twice.
std::vector<PolicyArm> parse_policy_list(std::string_view text);

// The bf16 reference arm: "full".
PolicyArm full_arm();

}  // namespace keel::eval
