// Kallsyms: /proc/kallsyms parsing and address -> "func+0xoff" lookup, on a fake file.
#include <sstream>

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
    "ffffffff82000000 D some_data\n"          // data: not a function
    "ffffffff81001080 T unsorted_in_file\n"   // files are not sorted in module areas
    "garbage line\n"
    "zzzzzzzzzzzzzzzz T bad_hex\n"
    "\n"
    "ffffffffc0a00000 t mod_fn\t[nf_tables]\n";

Kallsyms fake() {
  std::istringstream in(kFake);
  return Kallsyms::parse(in);
}

TEST(Kallsyms, KeepsTextSymbolsOnly) {
  EXPECT_EQ(fake().size(), 6u);  // _stext do_one do_two weak_fn unsorted_in_file mod_fn
}

TEST(Kallsyms, SymbolizesWithOffset) {
  Kallsyms k = fake();
  EXPECT_EQ(k.symbolize(0xffffffff81000000), "_stext+0x0");
  EXPECT_EQ(k.symbolize(0xffffffff8100101a), "do_one+0xa");
  EXPECT_EQ(k.symbolize(0xffffffff81001090), "unsorted_in_file+0x10");
  EXPECT_EQ(k.symbolize(0xffffffff81001104), "do_two+0x4");
  EXPECT_EQ(k.symbolize(0xffffffff81002abc), "weak_fn+0xabc");
  EXPECT_EQ(k.symbolize(0xffffffffc0a00042), "mod_fn+0x42 [nf_tables]");
}

TEST(Kallsyms, PaddingPrefixIsNotAFunction) {
  // __pfx_do_one is skipped: an address in the padding belongs to the function before.
  EXPECT_EQ(fake().symbolize(0xffffffff81001004), "_stext+0x1004");
}

TEST(Kallsyms, UnknownAddressesStayNumeric) {
  Kallsyms k = fake();
  EXPECT_EQ(k.symbolize(0xffffffff80000000), "0xffffffff80000000");  // below every symbol
  EXPECT_EQ(k.symbolize(0xffffffffc1000000), "0xffffffffc1000000");  // far past the last
}

TEST(Kallsyms, HiddenAddressesGiveAnEmptyTable) {
  // kptr_restrict shows zeros to unprivileged readers.
  std::istringstream in("0000000000000000 T _stext\n0000000000000000 t do_one\n");
  Kallsyms k = Kallsyms::parse(in);
  EXPECT_EQ(k.size(), 0u);
  EXPECT_EQ(k.symbolize(0xffffffff81000010), "0xffffffff81000010");
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
  const auto text = find_kernel_text(in, {"tick_sched_timer", "tick_nohz_handler",
                                          "asm_sysvec_apic_timer_interrupt", "some_data", "after_etext"});
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
