// `latency-doctor audit` run as a user runs it (the built binary as a child process) on the
// prepared trees: formats, -o files, exit codes of the contract (1 usage, 2 runtime, 3 --fail-on).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "../integration/proc_util.hpp"

namespace {

const std::string kBinary = std::string(LD_BUILD_DIR) + "/latency-doctor";
const std::string kFixtures = std::string(LD_TEST_FIXTURES_DIR) + "/audit";

struct AuditRun {
  int code = -1;
  std::string out, err;
};

AuditRun audit(std::vector<std::string> args) {
  args.insert(args.begin(), {kBinary, "audit"});
  ld::test::Child child(args);
  AuditRun run;
  // A generous bound so that a hang fails the test instead of the suite; not a timing check.
  run.code = child.wait(std::chrono::seconds(60)).value_or(-1);
  run.out = child.out();
  run.err = child.err();
  return run;
}

}  // namespace

TEST(AuditCli, JsonOnAPreparedTree) {
  AuditRun r = audit({"--root", kFixtures + "/bad", "--pid", "4242", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "latency-doctor/audit/v1");
  EXPECT_EQ(j["host"]["sysctl.vm.swappiness"], 60);
  EXPECT_EQ(j["target"]["comm"], "python3");
}

TEST(AuditCli, UsageErrorsExit1) {
  EXPECT_EQ(audit({"--root", kFixtures + "/bad", "--format", "xml"}).code, 1);
  EXPECT_EQ(audit({"--root", kFixtures + "/bad", "--fail-on", "info"}).code, 1);
  EXPECT_EQ(audit({"--root", kFixtures + "/bad", "--pid", "4242", "--cgroup", "/x"}).code, 1);
  AuditRun relative = audit({"--root", kFixtures + "/bad", "--nginx-conf", "nginx.conf"});
  EXPECT_EQ(relative.code, 1);
  EXPECT_NE(relative.err.find("--nginx-conf nginx.conf"), std::string::npos) << relative.err;
}

TEST(AuditCli, MissingTargetExits2WithOneLine) {
  AuditRun r = audit({"--root", kFixtures + "/bad", "--pid", "999999"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "latency-doctor audit: error: --pid 999999: no such process under " + kFixtures + "/bad/proc\n");
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(audit({"--root", kFixtures + "/bad", "--cgroup", "/nope.slice"}).code, 2);
}

TEST(AuditCli, OutputFileIs0600AndHoldsTheReport) {
  std::string path = testing::TempDir() + "/ld-audit-out.json";
  unlink(path.c_str());
  AuditRun r = audit({"--root", kFixtures + "/good", "--format", "json", "-o", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.empty());
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(nlohmann::json::parse(ld::test::read_file(path))["schema"], "latency-doctor/audit/v1");
  unlink(path.c_str());
}

TEST(AuditCli, PartialTreeStillReports) {
  AuditRun r = audit({"--root", kFixtures + "/partial", "--pid", "31"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("unknown ("), std::string::npos) << r.out;
  // nginx problems reach stderr with file:line.
  EXPECT_NE(r.err.find("/etc/nginx/nginx.conf:9: unterminated quoted string"), std::string::npos) << r.err;
}

// A --root that is missing, not a directory, unreadable or not a host tree at all is a
// runtime error with a one-line reason, never an empty audit that passes.
TEST(AuditCli, MissingOrUnreadableRootExits2WithOneLine) {
  AuditRun missing = audit({"--root", "/nonexistent-ld-root"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err, "latency-doctor audit: error: --root /nonexistent-ld-root: No such file or directory\n");
  EXPECT_TRUE(missing.out.empty());

  const std::string file = testing::TempDir() + "/ld-audit-root-file";
  { std::ofstream(file) << "x"; }
  AuditRun not_dir = audit({"--root", file, "--fail-on", "warn"});
  EXPECT_EQ(not_dir.code, 2);
  EXPECT_EQ(not_dir.err, "latency-doctor audit: error: --root " + file + ": not a directory\n");
  unlink(file.c_str());

  const std::string empty = testing::TempDir() + "/ld-audit-root-empty";
  mkdir(empty.c_str(), 0700);
  AuditRun nothing = audit({"--root", empty, "--format", "json"});
  EXPECT_EQ(nothing.code, 2);
  EXPECT_EQ(nothing.err, "latency-doctor audit: error: --root " + empty +
                             ": holds none of proc, sys and etc: not a host or image tree\n");
  EXPECT_TRUE(nothing.out.empty());

  // Unreadable: a directory this user may not list. Root may list anything, so the check runs
  // as root only where it can drop to another user (setpriv, util-linux).
  const std::string locked = testing::TempDir() + "/ld-audit-root-locked";
  mkdir(locked.c_str(), 0700);
  mkdir((locked + "/etc").c_str(), 0700);
  chmod(locked.c_str(), 0);
  if (geteuid() != 0) {
    AuditRun unreadable = audit({"--root", locked});
    EXPECT_EQ(unreadable.code, 2);
    EXPECT_EQ(unreadable.err,
              "latency-doctor audit: error: --root " + locked + ": cannot list it: Permission denied\n");
  } else if (access("/usr/bin/setpriv", X_OK) == 0) {
    ld::test::Child child(
        {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", kBinary, "audit", "--root", locked});
    EXPECT_EQ(child.wait(std::chrono::seconds(60)).value_or(-1), 2);
    EXPECT_EQ(child.err(), "latency-doctor audit: error: --root " + locked + ": cannot list it: Permission denied\n");
  }
  chmod(locked.c_str(), 0700);
  rmdir((locked + "/etc").c_str());
  rmdir(locked.c_str());
}
