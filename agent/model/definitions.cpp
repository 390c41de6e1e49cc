#include "model/definitions.hpp"

namespace ld::model {

namespace {

constexpr bool in_enum_order() {
  for (size_t i = 0; i < kDefinitions.size(); ++i)
    if (static_cast<size_t>(kDefinitions[i].definition) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kDefinitions must list every Definition once, in enum order");

}  // namespace

const DefinitionInfo& definition_info(Definition definition) {
  const auto i = static_cast<size_t>(definition);
  return kDefinitions[i < kDefinitionCount ? i : 0];
}

}  // namespace ld::model
