// util::read_file and util::FileCache: whole-file reads, files kept open and read again.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "host/host_facts.hpp"
#include "util/files.hpp"

namespace ld::util {
namespace {

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ld-files-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  // Rewrites the file in place (same inode, as the kernel's files change under a reader).
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name, std::ios::trunc) << text;
  }
  std::string dir_;
};

TEST_F(Files, ReadFileWholeOrEmpty) {
  write("a", std::string(10000, 'x') + "end");  // longer than one read chunk
  EXPECT_EQ(read_file(dir_ + "/a"), std::string(10000, 'x') + "end");
  EXPECT_EQ(read_file(dir_ + "/missing"), "");
  EXPECT_EQ(read_file(dir_), "");  // a directory
}

TEST_F(Files, CacheReadsTheFileAfreshEachTime) {
  FileCache cache;
  write("a", "first version, longer");
  EXPECT_EQ(cache.read(dir_ + "/a"), "first version, longer");
  write("a", "second");
  EXPECT_EQ(cache.read(dir_ + "/a"), "second");  // from offset 0, to the new end
  EXPECT_EQ(cache.open_files(), 1u);
  EXPECT_EQ(cache.read(dir_ + "/missing"), "");
  EXPECT_EQ(cache.open_files(), 1u);  // a failed open is not kept
}

TEST_F(Files, CacheRereadsKernelFiles) {
  FileCache cache;
  // seq_file: produced again at offset 0, each time whole.
  std::string first = cache.read("/proc/self/stat");
  std::string second = cache.read("/proc/self/stat");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.substr(0, first.find(' ')), std::to_string(getpid()));
  EXPECT_EQ(second.substr(0, second.find(')')), first.substr(0, first.find(')')));
  EXPECT_EQ(second.back(), '\n');
}

TEST_F(Files, CacheStaysBoundedAndCorrectPastItsLimit) {
  FileCache cache;
  for (int i = 0; i < 200; ++i) write(std::to_string(i), "file " + std::to_string(i));
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 200; ++i) ASSERT_EQ(cache.read(dir_ + "/" + std::to_string(i)), "file " + std::to_string(i));
  EXPECT_LE(cache.open_files(), 64u);
  EXPECT_GT(cache.open_files(), 0u);
}

TEST_F(Files, ReaderReadsThroughTheCache) {
  FileCache cache;
  write("a", "via reader");
  FileReader read = cache.reader();
  EXPECT_EQ(read(dir_ + "/a"), "via reader");
  EXPECT_EQ(cache.open_files(), 1u);
}

TEST_F(Files, PiecesGiveTheWholeFileInOrder) {
  write("a", std::string(5000, 'y') + "end");  // several 1 KiB pieces
  const int fd = open((dir_ + "/a").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string text;
  size_t pieces = 0;
  EXPECT_TRUE(read_pieces(fd, 1024, [&](std::string_view piece) {
    text.append(piece);
    ++pieces;
  }));
  close(fd);
  EXPECT_EQ(text, std::string(5000, 'y') + "end");
  EXPECT_EQ(pieces, 5u);
  EXPECT_FALSE(read_pieces(-1, 1024, [](std::string_view) {}));
}

TEST(ProcessAlive, TellsLiveFromZombieAndGone) {
  FileCache cache;
  FileReader read = cache.reader();
  EXPECT_TRUE(host::process_alive(getpid(), read));
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);  // exited, not reaped: a zombie
  EXPECT_FALSE(host::process_alive(child, read));
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(host::process_alive(child, read));
  EXPECT_FALSE(host::process_alive(0, read));
}

}  // namespace
}  // namespace ld::util
