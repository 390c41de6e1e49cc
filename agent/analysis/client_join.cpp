#include "analysis/client_join.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "model/stats.hpp"
#include "util/time.hpp"

namespace ld::analysis {

using model::Request;

namespace {

constexpr uint64_t kToleranceNs = 2 * util::kNsPerMs;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using util::delta_ms;

uint64_t abs_diff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// The server's token times one per SSE data event (a send of three events is three tokens sent
// at once), so the n-th token of each side is the same token.
template <typename T>
std::vector<T> per_event(const Request& r, const std::vector<T>& per_send) {
  std::vector<T> out;
  out.reserve(r.token_ns.size());
  for (size_t i = 0; i < r.token_ns.size(); ++i) {
    const uint16_t n = i < r.token_events.size() ? std::max<uint16_t>(1, r.token_events[i]) : 1;
    out.insert(out.end(), n, i < per_send.size() ? per_send[i] : T{});
  }
  return out;
}
std::vector<uint64_t> per_event_times(const Request& r) { return per_event(r, r.token_ns); }

double max_or_nan(const std::vector<double>& v) { return v.empty() ? kNaN : *std::max_element(v.begin(), v.end()); }

// How far `s`'s times are from `c`'s if `s` served `c`: what ranks the candidates. The wait
// before the server read the request and the difference in the last token; not the TTFTs'
// difference, in which the before and after terms cancel to server TTFT, a ranking that picks
// whichever candidate was slowest to its first token.
uint64_t misfit(const Request& c, const Request& s) {
  const uint64_t before = s.start_ns > c.start_ns ? s.start_ns - c.start_ns : 0;
  return before + abs_diff(c.token_ns.back(), s.token_ns.back());
}

bool causal(const Request& c, const Request& s) {
  return s.start_ns + kToleranceNs >= c.start_ns && s.token_ns.front() <= c.token_ns.front() + kToleranceNs;
}

struct Accumulators {
  std::vector<double> client_ttft, server_ttft, before, after, outside, share, client_gap, server_gap, lag;
  std::vector<double> held_lag, other_lag;  // lag split by whether Nagle held the token's send
};

model::JoinedRequest join_one(const Request& c, const Request& s, model::ClientJoin& join, Accumulators& acc) {
  model::JoinedRequest j;
  j.client_id = c.id;
  j.server_id = s.id;
  j.new_connection = s.index_on_connection == 1;
  j.client_ttft_ms = delta_ms(c.token_ns.front(), c.start_ns);
  j.server_ttft_ms = delta_ms(s.token_ns.front(), s.start_ns);
  j.before_server_ms = delta_ms(s.start_ns, c.start_ns);
  j.after_server_ms = delta_ms(c.token_ns.front(), s.token_ns.front());
  j.client_e2e_ms = delta_ms(c.token_ns.back(), c.start_ns);
  j.server_e2e_ms = delta_ms(s.token_ns.back(), s.start_ns);
  const std::vector<uint64_t> sent = per_event_times(s);
  j.client_tokens = c.token_ns.size();
  j.server_tokens = sent.size();
  const std::vector<double> client_gaps = c.gaps_ms();
  const std::vector<double> server_gaps = s.gaps_ms();
  j.client_gap_p50_ms = model::median(client_gaps);
  j.server_gap_p50_ms = model::median(server_gaps);
  j.client_gap_max_ms = max_or_nan(client_gaps);
  j.server_gap_max_ms = max_or_nan(server_gaps);
  const size_t n = std::min(sent.size(), c.token_ns.size());
  std::vector<double> lags;
  lags.reserve(n);
  const std::vector<uint8_t> sent_tcp = per_event(s, s.token_tcp);
  for (size_t k = 0; k < n; ++k) {
    lags.push_back(delta_ms(c.token_ns[k], sent[k]));
    if (sent_tcp[k] & model::kTcpRead)
      (model::held_by_nagle(sent_tcp[k]) ? acc.held_lag : acc.other_lag).push_back(lags.back());
    if (k == 0) continue;
    join.gaps++;
    if (delta_ms(c.token_ns[k], c.token_ns[k - 1]) < model::kBunchedArrivalMs &&
        delta_ms(sent[k], sent[k - 1]) >= model::kBunchedSentApartMs)
      j.bunched_tokens++;
  }
  join.bunched_tokens += j.bunched_tokens;
  j.lag_p50_ms = model::median(lags);
  j.lag_max_ms = max_or_nan(lags);
  acc.client_ttft.push_back(j.client_ttft_ms);
  acc.server_ttft.push_back(j.server_ttft_ms);
  acc.before.push_back(j.before_server_ms);
  acc.after.push_back(j.after_server_ms);
  acc.outside.push_back(j.client_ttft_ms - j.server_ttft_ms);
  if (j.client_ttft_ms > 0) acc.share.push_back((j.client_ttft_ms - j.server_ttft_ms) / j.client_ttft_ms);
  acc.client_gap.insert(acc.client_gap.end(), client_gaps.begin(), client_gaps.end());
  acc.server_gap.insert(acc.server_gap.end(), server_gaps.begin(), server_gaps.end());
  acc.lag.insert(acc.lag.end(), lags.begin(), lags.end());
  return j;
}

struct Assignment {
  std::vector<int64_t> server_of;  // per client, -1 when unmatched
  uint64_t by_port = 0;
};

// The server requests `c` could have caused, closest fit first: read after the client started
// it and before the client's first token.
std::vector<size_t> candidates_of(const Request& c, const std::vector<const Request*>& servers) {
  const uint64_t from = c.start_ns > kToleranceNs ? c.start_ns - kToleranceNs : 0;
  const uint64_t until = c.token_ns.front() + kToleranceNs;
  auto it = std::lower_bound(servers.begin(), servers.end(), from,
                             [](const Request* s, uint64_t t) { return s->start_ns < t; });
  std::vector<size_t> out;
  for (; it != servers.end() && (*it)->start_ns <= until; ++it)
    if (causal(c, **it)) out.push_back(static_cast<size_t>(it - servers.begin()));
  std::stable_sort(out.begin(), out.end(),
                   [&](size_t a, size_t b) { return misfit(c, *servers[a]) < misfit(c, *servers[b]); });
  return out;
}

// Kuhn's augmenting path from client `ci`: take a free candidate, or one whose client can move
// to another of its own. Port matches are certain and never moved. Iterative DFS: a long trace
// of concurrent requests must not grow the call stack.
bool augment(size_t ci, const std::vector<std::vector<size_t>>& cands, std::vector<int64_t>& server_of,
             std::vector<int64_t>& client_of, const std::vector<bool>& fixed, std::vector<uint32_t>& seen,
             uint32_t round) {
  struct Frame {
    size_t client;
    size_t next;
  };
  std::vector<Frame> stack{{ci, 0}};
  std::vector<size_t> path;  // the server taken at each frame but the top
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == cands[f.client].size()) {
      stack.pop_back();
      if (!path.empty()) path.pop_back();
      continue;
    }
    const size_t si = cands[f.client][f.next++];
    if (seen[si] == round) continue;
    seen[si] = round;
    const int64_t holder = client_of[si];
    if (holder >= 0 && fixed[static_cast<size_t>(holder)]) continue;
    path.push_back(si);
    if (holder < 0) {
      // Free: shift every client on the path onto the server it reached.
      for (size_t k = 0; k < stack.size(); ++k) {
        server_of[stack[k].client] = static_cast<int64_t>(path[k]);
        client_of[path[k]] = static_cast<int64_t>(stack[k].client);
      }
      return true;
    }
    stack.push_back({static_cast<size_t>(holder), 0});
  }
  return false;
}

// Each client request gets at most one server request and no server request serves two. A
// client and server with the same client port are certain; the rest are matched by time,
// closest fit first, then augmented so that an earlier client's closer fit never leaves a later
// client, which could only have caused that one request, unmatched.
Assignment assign(const std::vector<const Request*>& clients, const std::vector<const Request*>& servers) {
  Assignment out;
  out.server_of.assign(clients.size(), -1);
  std::vector<int64_t> client_of(servers.size(), -1);
  std::vector<bool> fixed(clients.size(), false);
  std::vector<std::vector<size_t>> cands(clients.size());
  for (size_t ci = 0; ci < clients.size(); ++ci) {
    cands[ci] = candidates_of(*clients[ci], servers);
    const uint16_t port = clients[ci]->client_port;
    if (!port) continue;
    for (size_t si : cands[ci]) {
      if (client_of[si] >= 0 || servers[si]->client_port != port) continue;
      out.server_of[ci] = static_cast<int64_t>(si);
      client_of[si] = static_cast<int64_t>(ci);
      fixed[ci] = true;
      out.by_port++;
      break;
    }
  }
  for (size_t ci = 0; ci < clients.size(); ++ci) {
    if (fixed[ci]) continue;
    for (size_t si : cands[ci]) {
      if (client_of[si] >= 0) continue;
      out.server_of[ci] = static_cast<int64_t>(si);
      client_of[si] = static_cast<int64_t>(ci);
      break;
    }
  }
  std::vector<uint32_t> seen(servers.size(), 0);
  uint32_t round = 0;
  for (size_t ci = 0; ci < clients.size(); ++ci)
    if (out.server_of[ci] < 0 && !cands[ci].empty()) augment(ci, cands, out.server_of, client_of, fixed, seen, ++round);
  return out;
}

}  // namespace

model::ClientJoin join_client(const model::Timeline& client, const model::Timeline& server, const std::string& source,
                              std::vector<std::string>& warnings) {
  model::ClientJoin join;
  join.source = source;
  std::vector<const Request*> clients, servers;
  for (const Request& r : client.requests)
    if (!r.token_ns.empty()) clients.push_back(&r);
  for (const Request& r : server.requests)
    if (!r.token_ns.empty()) servers.push_back(&r);
  join.client_requests = clients.size();
  join.server_requests = servers.size();
  if (clients.empty() || servers.empty()) return join;
  join.present = true;
  auto by_start = [](const Request* a, const Request* b) { return a->start_ns < b->start_ns; };
  std::stable_sort(clients.begin(), clients.end(), by_start);
  std::stable_sort(servers.begin(), servers.end(), by_start);

  const Assignment assignment = assign(clients, servers);
  Accumulators acc;
  for (size_t ci = 0; ci < clients.size(); ++ci) {
    if (assignment.server_of[ci] < 0) continue;
    join.requests.push_back(join_one(*clients[ci], *servers[static_cast<size_t>(assignment.server_of[ci])], join, acc));
  }
  const uint64_t by_port = assignment.by_port;
  join.matched = join.requests.size();
  join.method = join.matched > 0 && 2 * by_port >= join.matched ? "client_port" : "time";
  join.client_ttft_ms = model::describe(std::move(acc.client_ttft));
  join.server_ttft_ms = model::describe(std::move(acc.server_ttft));
  join.before_server_ms = model::describe(std::move(acc.before));
  join.after_server_ms = model::describe(std::move(acc.after));
  join.outside_ttft_ms = model::describe(std::move(acc.outside));
  join.outside_ttft_share = model::median(acc.share);
  join.client_gap_ms = model::describe(std::move(acc.client_gap));
  join.server_gap_ms = model::describe(std::move(acc.server_gap));
  join.lag_ms = model::describe(std::move(acc.lag));
  join.held_lag_ms = model::describe(std::move(acc.held_lag));
  join.other_lag_ms = model::describe(std::move(acc.other_lag));
  join.bunched_share = join.gaps ? static_cast<double>(join.bunched_tokens) / static_cast<double>(join.gaps) : 0.0;
  if (join.matched < join.client_requests)
    warnings.push_back(
        fmt::format("{}: {} of {} request(s) match no request in the server's sends (sent to another server, outside "
                    "the trace's window, or the two clocks differ by more than a few ms)",
                    source.rfind("jsonl:", 0) == 0 ? source.substr(6) : source, join.client_requests - join.matched,
                    join.client_requests));
  return join;
}

}  // namespace ld::analysis
