#pragma once
// Joins per-rank Chrome traces (one file per process of a launched job) into one trace with a
// process per rank, so Perfetto, chrome://tracing and the app's Timeline draw one lane group per
// rank. Every event of input i moves to pid = its rank; the process is named "rank r" (followed by
// the name the rank gave it) and sorted by rank. A rank is the input's "otherData": {"rank": r}
// when present, else its position in the list. Times are kept: each rank's clock as it wrote it.
#include <string>
#include <vector>

namespace dpv {

// traces: the JSON texts; names: for error messages (file names). Throws dpv::Error naming the input
// that is not a Chrome trace, or two inputs claiming the same rank.
std::string merge_chrome_traces(const std::vector<std::string>& traces, const std::vector<std::string>& names);
// Reads the files, merges them, writes `out` atomically.
void merge_trace_files(const std::string& out, const std::vector<std::string>& inputs);

}  // namespace dpv
