// The cuda probe's records (ld_cuda_call) in the analysis and by name: a well-formed one is
// neither malformed nor unknown, a short one is malformed, a type newer than this build is
// skipped and said to be; names of every api id the probe writes.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/event_analyzer.hpp"
#include "events.h"
#include "trace/cuda_api.hpp"

namespace {

ld_cuda_call sync_call() {
  ld_cuda_call c{};
  c.hdr.type = LD_EV_CUDA;
  c.hdr.size = sizeof(c);
  c.hdr.tgid = c.hdr.tid = 42;
  c.hdr.ts_ns = 2'000'000'000ULL;
  c.start_ns = c.hdr.ts_ns - 3'905'000;
  c.dur_ns = 3'905'000;
  c.arg = 0x5;
  c.count = 1;
  c.kind = LD_CUDA_SYNC;
  c.api = LD_CUDART_STREAM_SYNCHRONIZE;
  return c;
}

std::vector<std::string> warnings_after(const std::vector<std::pair<const ld_hdr*, size_t>>& recs) {
  ld::analysis::EventAnalyzer analyzer;
  for (const auto& [rec, size] : recs) analyzer.on_record(*rec, size);
  nlohmann::json header = {{"clock", {{"start_mono_ns", 1'000'000'000ULL}}}};
  nlohmann::json trailer = {{"end_mono_ns", 3'000'000'000ULL}};
  return analyzer.finish(header, trailer, "sse", {}).warnings;
}

bool said(const std::vector<std::string>& warnings, const std::string& what) {
  for (const auto& w : warnings)
    if (w.find(what) != std::string::npos) return true;
  return false;
}

TEST(CudaRecords, AWellFormedCallIsNeitherMalformedNorUnknown) {
  const ld_cuda_call c = sync_call();
  auto warnings = warnings_after({{&c.hdr, sizeof(c)}});
  EXPECT_FALSE(said(warnings, "malformed"));
  EXPECT_FALSE(said(warnings, "do not know"));
}

TEST(CudaRecords, AShortOneIsMalformed) {
  ld_cuda_call c = sync_call();
  c.hdr.size = sizeof(c) - 8;
  EXPECT_TRUE(said(warnings_after({{&c.hdr, sizeof(c) - 8}}), "1 malformed event record"));
}

// Why a new record type needs no layout bump: a reader that does not know it skips it by the
// header's size and says so, and reads everything else as before.
TEST(CudaRecords, ATypeNewerThanThisBuildIsSkippedAndSaidToBe) {
  ld_cuda_call c = sync_call();
  c.hdr.type = LD_EV_TYPE_MAX;
  auto warnings = warnings_after({{&c.hdr, sizeof(c)}});
  EXPECT_TRUE(said(warnings, "1 event record(s) of types this version does not know"));
  EXPECT_FALSE(said(warnings, "malformed"));
}

TEST(CudaRecords, EveryApiAndKindHasAName) {
  for (uint16_t api : {LD_CU_LAUNCH_KERNEL,
                       LD_CU_LAUNCH_KERNEL_EX,
                       LD_CU_LAUNCH_COOPERATIVE,
                       LD_CU_GRAPH_LAUNCH,
                       LD_CU_STREAM_SYNCHRONIZE,
                       LD_CU_CTX_SYNCHRONIZE,
                       LD_CU_EVENT_SYNCHRONIZE,
                       LD_CU_MEMCPY_DTOH,
                       LD_CU_MEMCPY_HTOD,
                       LD_CU_MEMCPY,
                       LD_CU_MEMCPY_ASYNC,
                       LD_CU_MEM_ALLOC,
                       LD_CU_MEM_FREE,
                       LD_CUDART_LAUNCH_KERNEL,
                       LD_CUDART_LAUNCH_KERNEL_EXC,
                       LD_CUDART_GRAPH_LAUNCH,
                       LD_CUDART_STREAM_SYNCHRONIZE,
                       LD_CUDART_DEVICE_SYNCHRONIZE,
                       LD_CUDART_EVENT_SYNCHRONIZE,
                       LD_CUDART_MEMCPY,
                       LD_CUDART_MEMCPY_ASYNC,
                       LD_CUDART_MALLOC,
                       LD_CUDART_FREE})
    EXPECT_STRNE(ld::trace::cuda_api_name(api), "?") << api;
  EXPECT_STREQ(ld::trace::cuda_api_name(LD_CUDA_API_UNKNOWN), "?");
  EXPECT_STREQ(ld::trace::cuda_api_name(LD_CUDA_API_MAX), "?");
  EXPECT_STREQ(ld::trace::cuda_kind_name(LD_CUDA_MEMCPY), "memcpy");
}

TEST(CudaRecords, OneLineDescriptions) {
  EXPECT_EQ(ld::trace::describe_cuda_call(sync_call()), "sync cudaStreamSynchronize 3.905 ms stream 0x5");
  ld_cuda_call burst = sync_call();
  burst.kind = LD_CUDA_LAUNCH;
  burst.api = LD_CU_LAUNCH_KERNEL;
  burst.count = 20;
  burst.arg = 0;
  burst.dur_ns = 412'000;
  EXPECT_EQ(ld::trace::describe_cuda_call(burst), "launch cuLaunchKernel x20 0.412 ms");
  ld_cuda_call copy = sync_call();
  copy.kind = LD_CUDA_MEMCPY;
  copy.api = LD_CUDART_MEMCPY;
  copy.arg = 4096;
  copy.ret = 700;
  EXPECT_EQ(ld::trace::describe_cuda_call(copy), "memcpy cudaMemcpy 3.905 ms 4096 bytes error 700");
}

}  // namespace
