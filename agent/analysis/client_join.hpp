// Client and server side by side (model/client_join.hpp): each request of a client's token log
// is joined to the server request it was served as.
//
// The join: a server request is a candidate for a client request when the server read it after
// the client started it and sent its first token before the client received one (a 2 ms
// tolerance covers stamps taken on either side of a syscall). When the log gives the client's
// port ("local_port", written by `bench`) and the server saw the same peer port, only those
// candidates count: exact on a direct connection. Behind a proxy the ports differ and the join
// falls back to time alone: of the candidates, the one with the least time outside the server
// (before it read the request + after its first and last tokens were sent). Pure analysis.
#pragma once

#include <string>
#include <vector>

#include "model/client_join.hpp"
#include "model/timeline.hpp"

namespace ld::analysis {

// `source` is how the report names the log ("jsonl:FILE"); warnings get the requests that could
// not be joined.
model::ClientJoin join_client(const model::Timeline& client, const model::Timeline& server, const std::string& source,
                              std::vector<std::string>& warnings);

}  // namespace ld::analysis
