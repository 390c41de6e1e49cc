// Facts: the flat, named values that rule conditions read (docs/rules.md lists every name).
//
// Two producers fill a FactSet: the attribution (report facts, from a Report: see
// report_facts() in analysis/facts.hpp) and the host readers (host facts, for `audit` and for
// the sysctl lines of report findings). The rules engine only reads them.
//
// Units, fixed so that rule authors never guess: times in milliseconds, sizes in bytes,
// frequencies in kHz, shares as fractions 0..1, counts as plain numbers. Booleans are
// true/false. A fact that was not observed is absent (conditions on it are false), never 0.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <variant>

namespace ld::rules {

using FactValue = std::variant<double, std::string, bool>;

class FactSet {
 public:
  void set(std::string name, double value) { values_[std::move(name)] = value; }
  void set(std::string name, std::string value) { values_[std::move(name)] = std::move(value); }
  void set(std::string name, const char* value) { values_[std::move(name)] = std::string(value); }
  void set(std::string name, bool value) { values_[std::move(name)] = value; }
  // Integers are numbers too.
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  void set(std::string name, I value) {
    values_[std::move(name)] = static_cast<double>(value);
  }

  const FactValue* get(std::string_view name) const {
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : &it->second;
  }
  bool has(std::string_view name) const { return get(name) != nullptr; }
  void merge(const FactSet& other) {
    for (const auto& [k, v] : other.values_) values_[k] = v;
  }
  const std::map<std::string, FactValue, std::less<>>& all() const { return values_; }

 private:
  std::map<std::string, FactValue, std::less<>> values_;
};

}  // namespace ld::rules
