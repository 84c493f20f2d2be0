#include "keel/model/dtype.h"

#include <array>
#include <utility>

namespace keel {
namespace {
struct DTypeRow {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeRow, 15> kDTypes{{
    {DType::F64, "F64", 8},   {DType::F32, "F32", 4},         {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8},         {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},   {DType::I8, "I8", 1},           {DType::U64, "U64", 8},
    {DType::U32, "U32", 4},   {DType::U16, "U16", 2},         {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
}};
}  // namespace

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& row : kDTypes)
    if (row.name == name) return row.type;
  return std::nullopt;
}

std::string_view dtype_name(DType t) { return kDTypes[static_cast<size_t>(t)].name; }
size_t dtype_size(DType t) { return kDTypes[static_cast<size_t>(t)].size; }

}  // namespace keel
