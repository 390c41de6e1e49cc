// Kernel address names from /proc/kallsyms text ("func+0xoff"), and kernel text ranges, on
// fake files.
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "probes/kallsyms.hpp"

namespace ld::probes {
namespace {

const char* kFake =
    "ffffffff81000000 T _stext\n"
    "ffffffff81001000 t __pfx_do_one\n"
    "ffffffff81001010 t do_one\n"
    "ffffffff81001100 T do_two\n"
    "ffffffff81002000 W weak_fn\n"
    "ffffffff82000000 D some_data\n"         // data: not a function
    "ffffffff81001080 T unsorted_in_file\n"  // files are not sorted in module areas
    "garbage line\n"
    "zzzzzzzzzzzzzzzz T bad_hex\n"
    "\n"
    "ffffffffc0a00000 t mod_fn\t[nf_tables]\n";

std::string fmt_line(uint64_t addr, const std::string& name) {
  char line[96];
  std::snprintf(line, sizeof(line), "%016llx t %s\n", static_cast<unsigned long long>(addr), name.c_str());
  return line;
}

// The names of `addrs` from `text` fed in pieces of `piece` bytes (0: whole).
KernelAddressNames names_of(std::vector<uint64_t> addrs, std::string_view text = kFake, size_t piece = 0) {
  KernelAddressNames names(std::move(addrs));
  if (piece == 0) piece = text.size();
  for (size_t at = 0; at < text.size(); at += piece) names.feed(text.substr(at, piece));
  names.finish();
  return names;
}

const std::vector<uint64_t> kWanted = {0xffffffff81000000, 0xffffffff8100101a, 0xffffffff81001090,
                                       0xffffffff81001104, 0xffffffff81002abc, 0xffffffffc0a00042,
                                       0xffffffff81001004, 0xffffffff80000000, 0xffffffffc1000000};

TEST(KernelAddressNames, KeepsTextSymbolsOnly) {
  // _stext do_one do_two weak_fn unsorted_in_file mod_fn
  EXPECT_EQ(names_of(kWanted).symbols_seen(), 6u);
}

TEST(KernelAddressNames, SymbolizesWithOffset) {
  const KernelAddressNames k = names_of(kWanted);
  EXPECT_EQ(k.symbolize(0xffffffff81000000), "_stext+0x0");
  EXPECT_EQ(k.symbolize(0xffffffff8100101a), "do_one+0xa");
  EXPECT_EQ(k.symbolize(0xffffffff81001090), "unsorted_in_file+0x10");
  EXPECT_EQ(k.symbolize(0xffffffff81001104), "do_two+0x4");
  EXPECT_EQ(k.symbolize(0xffffffff81002abc), "weak_fn+0xabc");
  EXPECT_EQ(k.symbolize(0xffffffffc0a00042), "mod_fn+0x42 [nf_tables]");
}

TEST(KernelAddressNames, PaddingPrefixIsNotAFunction) {
  // __pfx_do_one is skipped: an address in the padding belongs to the function before.
  EXPECT_EQ(names_of(kWanted).symbolize(0xffffffff81001004), "_stext+0x1004");
}

TEST(KernelAddressNames, UnknownAddressesStayNumeric) {
  const KernelAddressNames k = names_of(kWanted);
  EXPECT_EQ(k.symbolize(0xffffffff80000000), "0xffffffff80000000");  // below every symbol
  EXPECT_EQ(k.symbolize(0xffffffffc1000000), "0xffffffffc1000000");  // far past the last
  EXPECT_EQ(k.symbolize(0xffffffff81001020), "0xffffffff81001020");  // not asked for
}

TEST(KernelAddressNames, HiddenAddressesNameNothing) {
  // kptr_restrict shows zeros to unprivileged readers.
  const KernelAddressNames k = names_of({0xffffffff81000010}, "0000000000000000 T _stext\n0000000000000000 t do_one\n");
  EXPECT_EQ(k.symbols_seen(), 0u);
  EXPECT_EQ(k.symbolize(0xffffffff81000010), "0xffffffff81000010");
}

TEST(KernelAddressNames, PiecesThatSplitLinesGiveTheSameNames) {
  const KernelAddressNames whole = names_of(kWanted);
  for (size_t piece = 1; piece < 64; ++piece) {
    const KernelAddressNames pieces = names_of(kWanted, kFake, piece);
    EXPECT_EQ(pieces.symbols_seen(), whole.symbols_seen()) << "pieces of " << piece;
    for (uint64_t addr : kWanted) EXPECT_EQ(pieces.symbolize(addr), whole.symbolize(addr)) << "pieces of " << piece;
  }
  // The last line without its newline still counts.
  EXPECT_EQ(names_of({0xffffffff81000004}, "ffffffff81000000 T last").symbolize(0xffffffff81000004), "last+0x4");
}

TEST(KernelAddressNames, AliasesAtOneAddressTakeTheLastInTheFile) {
  const KernelAddressNames k = names_of({0xffffffff81000008}, "ffffffff81000000 T first\nffffffff81000000 t second\n");
  EXPECT_EQ(k.symbolize(0xffffffff81000008), "second+0x8");
}

// Against the definition (the highest text symbol at or below the address), on shuffled
// files and address sets where many addresses share a symbol and many symbols fall between
// two addresses.
TEST(KernelAddressNames, MatchesTheHighestSymbolAtOrBelowOnRandomFiles) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 50; ++round) {
    std::vector<uint64_t> symbols;
    for (int i = 0; i < 200; ++i) symbols.push_back(0xffffffff81000000 + (rng() % 0x100000));
    std::string text;
    for (uint64_t addr : symbols) text += fmt_line(addr, "f" + std::to_string(addr & 0xfffff));
    std::vector<uint64_t> wanted;
    for (int i = 0; i < 100; ++i) wanted.push_back(0xffffffff81000000 - 0x100 + (rng() % 0x100200));
    const KernelAddressNames k = names_of(wanted, text, 1 + rng() % 300);
    for (uint64_t addr : wanted) {
      uint64_t best = 0;
      for (uint64_t s : symbols)
        if (s <= addr && s >= best) best = s;
      char expected[64];
      if (best)
        std::snprintf(expected, sizeof(expected), "f%llu+0x%llx", static_cast<unsigned long long>(best & 0xfffff),
                      static_cast<unsigned long long>(addr - best));
      else std::snprintf(expected, sizeof(expected), "0x%llx", static_cast<unsigned long long>(addr));
      ASSERT_EQ(k.symbolize(addr), expected) << "round " << round;
    }
  }
}

TEST(KernelText, FindsEachNameInOnePassUpToEtext) {
  std::istringstream in(
      "ffffffff81000000 T _stext\n"
      "ffffffff81001000 t tick_nohz_handler\n"
      "ffffffff81001000 t alias_of_tick\n"  // same address: the range ends at the next higher
      "ffffffff81001200 T next_fn\n"
      "ffffffff81002000 T asm_sysvec_apic_timer_interrupt\n"
      "ffffffff82000000 D some_data\n"  // ends the entry's range, is no function itself
      "ffffffff82100000 T _etext\n"
      "ffffffffc0a00000 t after_etext\t[mod]\n");
  const auto text = find_kernel_text(
      in, {"tick_sched_timer", "tick_nohz_handler", "asm_sysvec_apic_timer_interrupt", "some_data", "after_etext"});
  ASSERT_EQ(text.size(), 5u);
  EXPECT_EQ(text[0].start, 0u);  // absent
  EXPECT_EQ(text[1].start, 0xffffffff81001000u);
  EXPECT_EQ(text[1].end, 0xffffffff81001200u);
  EXPECT_EQ(text[2].start, 0xffffffff81002000u);
  EXPECT_EQ(text[2].end, 0xffffffff82000000u);
  EXPECT_EQ(text[3].start, 0u);  // data, not text
  EXPECT_EQ(text[4].start, 0u);  // past _etext: not read
}

TEST(KernelText, NoEndOrHiddenAddressesGiveNoRange) {
  std::istringstream last("ffffffff81000000 T _stext\nffffffff81001000 t only_fn\n");
  EXPECT_EQ(find_kernel_text(last, {"only_fn"})[0].start, 0u);  // no symbol after it
  std::istringstream hidden("0000000000000000 T _stext\n0000000000000000 t fn\n0000000000000000 t fn\n");
  const auto text = find_kernel_text(hidden, {"fn"});
  EXPECT_EQ(text[0].start, 0u);
  EXPECT_EQ(text[0].end, 0u);
}

}  // namespace
}  // namespace ld::probes
