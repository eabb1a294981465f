#include "cli/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>

#include "cli/ddp_launched.h"
#include "cli/flag_errors.h"
#include "cli/train_ddp.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "engine/process_groups/multiprocess/rank_env.h"

namespace dpv::cli {
namespace {

std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

[[noreturn]] void fail(const std::string& option, int err, const std::string& path, const std::string& context = "") {
  const Error e = file_error(err, path, context);
  throw e.reworded(option + ": " + e.what());
}

// What makes two paths the same file: its identity when it exists, else the normalised path.
struct FileKey {
  std::optional<std::pair<dev_t, ino_t>> identity;
  std::string normalised;
};

FileKey key_of(const std::string& path) {
  FileKey k;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) k.identity = std::make_pair(info.st_dev, info.st_ino);
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  k.normalised = ec ? std::filesystem::path(path).lexically_normal().string() : p.lexically_normal().string();
  return k;
}

// The paths seen so far, by identity and by normalised path, each with the entry that named it.
struct SeenFiles {
  std::map<std::pair<dev_t, ino_t>, const NamedPath*> by_identity;
  std::map<std::string, const NamedPath*> by_path;

  const NamedPath* find(const FileKey& k) const {
    if (k.identity) {
      auto it = by_identity.find(*k.identity);
      if (it != by_identity.end()) return it->second;
    }
    auto it = by_path.find(k.normalised);
    return it == by_path.end() ? nullptr : it->second;
  }
  void add(const FileKey& k, const NamedPath* named) {
    if (k.identity) by_identity.emplace(*k.identity, named);
    by_path.emplace(k.normalised, named);
  }
};

}  // namespace

void check_outputs_distinct(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  SeenFiles seen_inputs, seen_outputs;
  for (const NamedPath& in : inputs)
    if (!in.path.empty()) seen_inputs.add(key_of(in.path), &in);
  for (const NamedPath& out : outputs) {
    if (out.path.empty()) continue;
    const FileKey k = key_of(out.path);
    if (const NamedPath* in = seen_inputs.find(k)) {
      throw Error(out.option + " '" + out.path + "' is the same file as " + in->option + " '" + in->path +
                      "'; writing it would replace that input. Choose another output name",
                  ErrorClass::ValueError);
    }
    if (const NamedPath* other = seen_outputs.find(k)) {
      throw Error(out.option + " '" + out.path + "' is the same file as " + other->option + " '" + other->path +
                      "'; one output would replace the other. Choose another output name",
                  ErrorClass::ValueError);
    }
    seen_outputs.add(k, &out);
  }
}

void check_trace_outputs(const std::string& trace, bool ddp, const std::vector<std::pair<std::string, std::string>>& inputs) {
  check_not_an_input(trace, "--trace", inputs);
  if (!ddp || !launched_rank()) return;  // only a launched job's ranks write per-rank traces
  int world = 0;
  try {
    world = dist::read_rank_env(dist::environment_lookup()).world_size;
  } catch (const Error&) {
    return;  // joining the job reports bad rank variables, with their fix
  }
  std::vector<NamedPath> outputs{{"--trace", trace}};
  for (int r = 0; r < world; ++r)
    outputs.push_back({"rank " + std::to_string(r) + "'s trace (from --trace '" + trace + "')", rank_trace_path(trace, r)});
  std::vector<NamedPath> named_inputs;
  for (const auto& [option, path] : inputs) named_inputs.push_back({option, path});
  check_outputs_distinct(outputs, named_inputs);
}

void check_output_path(const std::string& path, const std::string& option) {
  if (path.empty()) throw Error(option + ": the file name is empty", ErrorClass::FileNotFoundError);
  const std::string target = with_flag(option, [&] { return checked_write_target(path); });
  struct stat info {};
  const std::string folder = folder_of(target);
  const std::string context = "the folder for '" + path + "'";
  if (::stat(folder.c_str(), &info) != 0) fail(option, errno, folder, context);
  if (!S_ISDIR(info.st_mode)) fail(option, ENOTDIR, folder, context);
  // The temporary file is created in that folder, so it needs write and search permission.
  if (::access(folder.c_str(), W_OK | X_OK) != 0) fail(option, errno, folder, context);
}

void check_not_an_input(const std::string& path, const std::string& option,
                        const std::vector<std::pair<std::string, std::string>>& inputs) {
  struct stat out {};
  if (path.empty() || ::stat(path.c_str(), &out) != 0) return;  // a new file is no input
  for (const auto& [input_option, input] : inputs) {
    struct stat in {};
    if (input.empty() || ::stat(input.c_str(), &in) != 0) continue;
    if (in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
      throw Error(option + " '" + path + "' is the same file as " + input_option + " '" + input +
                      "'; writing it would replace that input. Choose another output file",
                  ErrorClass::ValueError);
    }
  }
}

}  // namespace dpv::cli
