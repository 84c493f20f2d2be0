#pragma once
// Element types that appear in safetensors files, with their names as the format spells them.
// Constants and pure functions: any thread.
#include <cstddef>
#include <optional>
#include <string_view>

namespace keel {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL, F8_E4M3, F8_E5M2 };

std::optional<DType> dtype_from_name(std::string_view name);  // "BF16" -> DType::BF16
std::string_view dtype_name(DType t);
size_t dtype_size(DType t);  // bytes per element

}  // namespace keel
