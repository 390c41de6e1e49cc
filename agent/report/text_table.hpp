// A plain-text table with aligned columns, for the text report. Widths count UTF-8 code points
// (ids and paths may contain non-ASCII), which is right for every character the report uses.
#pragma once

#include <string>
#include <vector>

namespace ld::report {

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kRight;
};

class TextTable {
 public:
  explicit TextTable(std::vector<Column> columns);
  void add_row(std::vector<std::string> cells);  // missing cells are blank, extra ones dropped
  // Each line starts with `indent` and ends with '\n'; columns are two spaces apart and
  // trailing blanks are trimmed.
  std::string render(const std::string& indent) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

size_t display_width(const std::string& text);
// Control characters (a token log's id, a process name) must not reach a terminal as-is.
std::string printable(const std::string& text);

}  // namespace ld::report
