#include "analysis/client_join.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "model/stats.hpp"

namespace ld::analysis {

using model::Request;

namespace {

constexpr uint64_t kToleranceNs = 2'000'000;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double ms(uint64_t later, uint64_t earlier) {
  return (static_cast<double>(later) - static_cast<double>(earlier)) / 1e6;
}

uint64_t abs_diff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

// The server's token times one per SSE data event (a send of three events is three tokens sent
// at once), so the n-th token of each side is the same token.
std::vector<uint64_t> per_event_times(const Request& r) {
  std::vector<uint64_t> out;
  out.reserve(r.token_ns.size());
  for (size_t i = 0; i < r.token_ns.size(); ++i) {
    const uint16_t n = i < r.token_events.size() ? std::max<uint16_t>(1, r.token_events[i]) : 1;
    out.insert(out.end(), n, r.token_ns[i]);
  }
  return out;
}

double max_or_nan(const std::vector<double>& v) {
  return v.empty() ? kNaN : *std::max_element(v.begin(), v.end());
}

// Time outside the server if `s` served `c`: what ranks the candidates.
uint64_t outside_cost(const Request& c, const Request& s) {
  const uint64_t before = s.start_ns > c.start_ns ? s.start_ns - c.start_ns : 0;
  const uint64_t after = c.token_ns.front() > s.token_ns.front() ? c.token_ns.front() - s.token_ns.front() : 0;
  return before + after + abs_diff(c.token_ns.back(), s.token_ns.back());
}

bool causal(const Request& c, const Request& s) {
  return s.start_ns + kToleranceNs >= c.start_ns && s.token_ns.front() <= c.token_ns.front() + kToleranceNs;
}

struct Accumulators {
  std::vector<double> client_ttft, server_ttft, before, after, outside, share, client_gap, server_gap, lag;
};

model::JoinedRequest join_one(const Request& c, const Request& s, model::ClientJoin& join, Accumulators& acc) {
  model::JoinedRequest j;
  j.client_id = c.id;
  j.server_id = s.id;
  j.new_connection = s.index_on_connection == 1;
  j.client_ttft_ms = ms(c.token_ns.front(), c.start_ns);
  j.server_ttft_ms = ms(s.token_ns.front(), s.start_ns);
  j.before_server_ms = ms(s.start_ns, c.start_ns);
  j.after_server_ms = ms(c.token_ns.front(), s.token_ns.front());
  j.client_e2e_ms = ms(c.token_ns.back(), c.start_ns);
  j.server_e2e_ms = ms(s.token_ns.back(), s.start_ns);
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
  for (size_t k = 0; k < n; ++k) {
    lags.push_back(ms(c.token_ns[k], sent[k]));
    if (k == 0) continue;
    join.gaps++;
    if (ms(c.token_ns[k], c.token_ns[k - 1]) < model::kBunchedArrivalMs &&
        ms(sent[k], sent[k - 1]) >= model::kBunchedSentApartMs)
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

}  // namespace

model::ClientJoin join_client(const model::Timeline& client, const model::Timeline& server,
                              const std::string& source, std::vector<std::string>& warnings) {
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

  std::vector<bool> used(servers.size(), false);
  Accumulators acc;
  uint64_t by_port = 0;
  for (const Request* c : clients) {
    // The server read it after the client started it, and before the client's first token.
    const uint64_t from = c->start_ns > kToleranceNs ? c->start_ns - kToleranceNs : 0;
    const uint64_t until = c->token_ns.front() + kToleranceNs;
    auto it = std::lower_bound(servers.begin(), servers.end(), from,
                               [](const Request* s, uint64_t t) { return s->start_ns < t; });
    int64_t best = -1, best_port = -1;
    uint64_t best_cost = UINT64_MAX, best_port_cost = UINT64_MAX;
    for (; it != servers.end() && (*it)->start_ns <= until; ++it) {
      const size_t i = static_cast<size_t>(it - servers.begin());
      if (used[i] || !causal(*c, **it)) continue;
      const uint64_t cost = outside_cost(*c, **it);
      if (cost < best_cost) { best_cost = cost; best = static_cast<int64_t>(i); }
      if (c->client_port && c->client_port == (*it)->client_port && cost < best_port_cost) {
        best_port_cost = cost;
        best_port = static_cast<int64_t>(i);
      }
    }
    if (best_port >= 0) {
      best = best_port;
      by_port++;
    }
    if (best < 0) continue;
    used[static_cast<size_t>(best)] = true;
    join.requests.push_back(join_one(*c, *servers[static_cast<size_t>(best)], join, acc));
  }
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
  join.bunched_share = join.gaps ? static_cast<double>(join.bunched_tokens) / static_cast<double>(join.gaps) : 0.0;
  if (join.matched < join.client_requests)
    warnings.push_back(fmt::format(
        "{}: {} of {} request(s) match no request in the server's sends (sent to another server, outside "
        "the trace's window, or the two clocks differ by more than a few ms)",
        source.rfind("jsonl:", 0) == 0 ? source.substr(6) : source, join.client_requests - join.matched,
        join.client_requests));
  return join;
}

}  // namespace ld::analysis
