#include "keel/api/json_text.h"

namespace keel::api {

std::string to_json_text(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace keel::api
