// The strings of an enum that lives as a string outside the program (JSON, trace files, text,
// metric labels): one table of {value, name} per enum, read both ways. The code holds the enum;
// the string appears only where the value crosses that boundary.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace ld::util {

template <class E, size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

// Row i names value i: name_of() indexes the table, and a static_assert on this catches a
// value added to the enum but not to its table (or out of order).
template <class E, size_t N>
constexpr bool names_every_value_in_order(const EnumNames<E, N>& names) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(names[i].first) != i) return false;
  return true;
}

// The value's name; "" for a value past the table.
template <class E, size_t N>
constexpr std::string_view name_of(const EnumNames<E, N>& names, E value) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i].second : std::string_view();
}

// The value of that name, nullopt for a name not in the table.
template <class E, size_t N>
constexpr std::optional<E> value_of(const EnumNames<E, N>& names, std::string_view name) {
  for (const auto& [value, text] : names)
    if (text == name) return value;
  return std::nullopt;
}

}  // namespace ld::util
