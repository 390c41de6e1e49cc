// reclaim_memcg: run inside a memory cgroup with a small limit (the test puts it there).
// After SIGUSR1: write a 96 MiB file (synced every 4 MiB so the page cache stays clean), drop
// it from the cache, read it back. Every charge above the limit makes this thread reclaim
// its own cgroup's pages (memcg reclaim). Prints its tid; removes the file.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "workload.hpp"

int main() {
  ld::wl::wait_for_go();
  long tid = syscall(SYS_gettid);
  std::string path = "/var/tmp/ld-reclaim-test-" + std::to_string(getpid()) + ".dat";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror("open");
    return 1;
  }
  std::vector<char> chunk(1 << 20, 'r');
  int rc = 0;
  for (int i = 0; i < 96 && rc == 0; ++i) {
    if (write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) rc = 1;
    if (i % 4 == 3) fdatasync(fd);
  }
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  uint64_t t0 = ld::wl::mono_ns();
  size_t total = 0;
  ssize_t n;
  lseek(fd, 0, SEEK_SET);
  while ((n = read(fd, chunk.data(), chunk.size())) > 0) total += n;
  uint64_t t1 = ld::wl::mono_ns();
  close(fd);
  unlink(path.c_str());
  printf("tid=%ld read=%zu read_ns=%llu\n", tid, total, (unsigned long long)(t1 - t0));
  return rc;
}
