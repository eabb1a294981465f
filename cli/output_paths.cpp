#include "cli/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "cli/flag_errors.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"

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

}  // namespace

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
