// disk_fsync: after SIGUSR1, 5 times: write 8 MiB to /var/tmp/ld-fsync-test-PID/app.log, then
// fsync it, timing each fsync itself. Prints its tid and each fsync's duration. Then, for the
// path logic: fdatasync of a file 6 directories deep (more names than the probe keeps),
// sync_file_range of 4096 bytes, and fdatasync of a file on /dev/shm (two mount points up).
// Cleans up.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "workload.hpp"

int main() {
  ld::wl::wait_for_go();
  long tid = syscall(SYS_gettid);
  std::string dir = "/var/tmp/ld-fsync-test-" + std::to_string(getpid());
  std::string path = dir + "/app.log";
  mkdir(dir.c_str(), 0700);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror("open");
    return 1;
  }
  printf("tid=%ld fd=%d path=%s\n", tid, fd, path.c_str());
  std::vector<char> chunk(1 << 20, 'x');
  int rc = 0;
  for (int round = 0; round < 5 && rc == 0; ++round) {
    for (int i = 0; i < 8; ++i)
      if (write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) rc = 1;
    uint64_t t0 = ld::wl::mono_ns();
    if (fsync(fd) != 0) rc = 1;
    uint64_t t1 = ld::wl::mono_ns();
    printf("fsync start=%llu dur_ns=%llu\n", (unsigned long long)t0, (unsigned long long)(t1 - t0));
  }
  close(fd);
  unlink(path.c_str());

  std::string deep = dir;
  for (const char* d : {"/a", "/b", "/c", "/d", "/e"}) mkdir((deep += d).c_str(), 0700);
  std::string deep_path = deep + "/deep.log";
  int dfd = open(deep_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (dfd < 0 || write(dfd, chunk.data(), 8192) != 8192) rc = 1;
  fdatasync(dfd);
  sync_file_range(dfd, 0, 4096, SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
  close(dfd);
  unlink(deep_path.c_str());
  for (int i = 0; i < 5; ++i) {
    rmdir(deep.c_str());
    deep.resize(deep.rfind('/'));
  }
  std::string shm = "/dev/shm/ld-fsync-test-" + std::to_string(getpid()) + ".shm";
  int sfd = open(shm.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (sfd >= 0) {
    fdatasync(sfd);
    close(sfd);
    unlink(shm.c_str());
    printf("shm=%s\n", shm.c_str());
  }
  rmdir(dir.c_str());
  fflush(stdout);
  return rc;
}
