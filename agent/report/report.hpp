// The renderers: a model::Report (model/report.hpp) as text, JSON (schema
// latency-doctor/report/v1), Markdown, HTML or a Perfetto trace. Pure functions of the report.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/report.hpp"

namespace ld::report {

nlohmann::json to_json(const model::Report& report);  // NaN values become null
// One finding as the report's JSON renders it (also used by `audit --format json`).
nlohmann::ordered_json finding_to_json(const model::Finding& finding);
std::string render_json(const model::Report& report);  // pretty, trailing newline; never throws on odd UTF-8
std::string render_text(const model::Report& report);
std::string render_markdown(const model::Report& report);  // GitHub-flavoured tables, for tickets
std::string render_html(const model::Report& report);      // one self-contained page with SVG plots
// Chrome trace-event JSON for the Perfetto UI: a track per target thread with its states
// (report.tracks, when kept), token emissions as instants, outliers as slices with causes.
std::string render_perfetto(const model::Report& report);

// Shared by the renderers: the evidence of one cause as a short phrase for people
// ("fdatasync /var/log/app.log", "behind cc1plus (pid 7933)"); "" when there is none.
std::string evidence_phrase(const model::CauseTime& cause);
// One finding as the text report shows it: "[severity] title", then evidence, fix, sysctl
// lines and verify, indented (also used by `audit`).
std::string finding_text(const model::Finding& finding);

}  // namespace ld::report
