// The processes of one server. vLLM v1 and SGLang run the API server (uvicorn) in one process
// and the engine in others that it talks to over unix sockets (ZMQ IPC), pipes and shared
// memory; a user attaches to the API server's pid. Every process that a target's threads hand
// work to or from is part of the server: its waits, disk IO and CPU explain the target's tokens.
//
// Found once, at attach: the targets' descendants, then the processes holding the other end of
// a unix socket or a pipe that a target (or a descendant) holds on fd 3 or above, or mapping the
// same shared memory (/dev/shm, memfd), and their descendants. Left out: processes of another
// user, pid 1, the host's infrastructure (the journal, D-Bus, sshd, container shims), the
// targets' ancestors (a supervisor, the shell) and the agent's own; fd 0-2 (a service's log
// pipe or journal socket) never link, nor does a pipe or socket that an ancestor holds too (a
// leaked fd that siblings inherited).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ld::host {

// A process that serves with the targets, and why it was taken in.
struct Peer {
  int pid = 0;
  std::string comm;
  std::string why;  // "a child of 4242", "connected to 4242 over a unix socket (/tmp/x/ipc)"
};

// What the peer search reads of one process.
struct ProcessLinks {
  int pid = 0, ppid = 0;
  uint32_t uid = 0;
  std::string comm;
  // fd number -> what it is: "socket:[123]", "pipe:[456]", "anon_inode:[eventfd]", a path.
  std::map<int, std::string> fds;
  // Shared memory it maps: "dev:inode" -> the mapping's name ("/dev/shm/psm_1a2b", "/memfd:x").
  std::map<std::string, std::string> shared_memory;
};

// Every process's links, as /proc shows them now (processes that vanish meanwhile are skipped).
// Shared memory mappings (a /proc/PID/maps each) are read only for the processes of
// `maps_of_uid` (the targets' user: no other is ever a peer); none when it is unset.
std::vector<ProcessLinks> read_process_links(std::optional<uint32_t> maps_of_uid);
// The unix sockets' peers: socket inode -> its peer's inode (NETLINK_SOCK_DIAG); empty when the
// kernel does not answer. `paths`: a bound socket's inode -> its path, where it has one.
std::map<uint64_t, uint64_t> unix_socket_peers(std::map<uint64_t, std::string>* paths = nullptr);

// The search itself, on what was read (pure: unit-tested on made-up processes). `targets`: the
// pids asked for; `agent`: the agent's pid (it and its ancestors are never peers).
std::vector<Peer> find_peers(const std::vector<int>& targets, const std::vector<ProcessLinks>& processes,
                             const std::map<uint64_t, uint64_t>& unix_peers,
                             const std::map<uint64_t, std::string>& unix_paths, int agent);

// read_process_links + unix_socket_peers + find_peers on this host.
std::vector<Peer> server_peers(const std::vector<int>& targets);

}  // namespace ld::host
