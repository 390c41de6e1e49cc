// The enums that travel as strings (util/enum_names.hpp): every value has its name, and each
// name reads back as its value.
#include <gtest/gtest.h>

#include "model/report.hpp"
#include "trace/trace_header.hpp"

using namespace ld::model;

TEST(EnumNames, WindowKind) {
  EXPECT_EQ(window_kind_name(WindowKind::kTtft), "ttft");
  EXPECT_EQ(window_kind_name(WindowKind::kTpot), "tpot");
  for (const auto& [kind, name] : kWindowKindNames) EXPECT_EQ(parse_window_kind(name), kind);
  EXPECT_FALSE(parse_window_kind("TTFT").has_value());
  EXPECT_FALSE(parse_window_kind("").has_value());
}

TEST(EnumNames, ProbeState) {
  for (const auto& [state, name] : kProbeStateNames) EXPECT_EQ(parse_probe_state(name), state);
  EXPECT_EQ(probe_state_name(ProbeState::kUnavailable), "unavailable");
  EXPECT_EQ(probe_state_name(ProbeState::kOther), "");
  EXPECT_FALSE(parse_probe_state("?").has_value());
  ProbeStatus p{"sock", ProbeState::kDisabled, "", 0, 0};
  EXPECT_EQ(p.status_name(), "disabled");
  p.status = ProbeState::kOther;
  p.other_status = "paused";
  EXPECT_EQ(p.status_name(), "paused");
}

TEST(EnumNames, StopReason) {
  using ld::trace::StopReason;
  for (const auto& [reason, name] : ld::trace::kStopReasonNames) EXPECT_EQ(ld::trace::parse_stop_reason(name), reason);
  EXPECT_EQ(ld::trace::stop_reason_name(StopReason::kTargetExit), "target-exit");
  EXPECT_EQ(ld::trace::stop_reason_name(StopReason::kOther), "");
  EXPECT_FALSE(ld::trace::parse_stop_reason("target_exit").has_value());
}
