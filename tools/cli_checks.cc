#include "tools/cli_checks.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "graph/error.h"

namespace ot::tools {

namespace fs = std::filesystem;

CLI::Validator AtLeast(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end || errno == ERANGE || v < lo)
          return "expected an integer >= " + std::to_string(lo) + ", got '" + s + "'";
        return "";
      },
      "INT>=" + std::to_string(lo));
}

CLI::Validator FiniteNumber(bool positive) {
  return CLI::Validator(
      [positive](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end || !std::isfinite(v) || (positive ? !(v > 0) : !(v >= 0)))
          return std::string("expected a finite number ") + (positive ? "> 0" : ">= 0") + ", got '" + s + "'";
        return "";
      },
      positive ? "NUMBER>0" : "NUMBER>=0");
}

CLI::Validator NonEmptyPath() {
  return CLI::Validator([](std::string& s) -> std::string { return s.empty() ? "expected a path, got ''" : ""; },
                        "PATH");
}

namespace {
[[noreturn]] void Refuse(const std::string& option, const std::string& path, const std::string& why) {
  throw Error(option + ": cannot write '" + path + "' (" + why + ")");
}

// The folder a new entry `path` would be created in ("." for a bare name).
fs::path FolderOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void CheckWritableFolder(const std::string& option, const std::string& path, const fs::path& folder) {
  std::error_code ec;
  const fs::file_status st = fs::status(folder, ec);
  if (ec || !fs::exists(st)) Refuse(option, path, "no folder " + folder.string());
  if (!fs::is_directory(st)) Refuse(option, path, folder.string() + " is not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0) Refuse(option, path, folder.string() + ": " + std::strerror(errno));
}
}  // namespace

void CheckOutputFile(const std::string& option, const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) Refuse(option, path, "it is a folder");
    if (::access(path.c_str(), W_OK) != 0) Refuse(option, path, std::strerror(errno));
    if (!fs::is_regular_file(st)) return;  // a device or a pipe is written in place
  }
  CheckWritableFolder(option, path, FolderOf(path));  // a new file, or the temporary one that replaces it
}

void CheckOutputDir(const std::string& option, const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) Refuse(option, path, ec.message());
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) Refuse(option, path, "it is not a folder");
    if (::access(p.c_str(), W_OK | X_OK) != 0) Refuse(option, path, std::strerror(errno));
    return;
  }
  // Created when the first checkpoint is written: its nearest existing ancestor must take new folders.
  for (p = p.parent_path(); !p.empty(); p = p.parent_path()) {
    const fs::file_status a = fs::status(p, ec);
    if (!fs::exists(a)) {
      if (p == p.root_path()) break;
      continue;
    }
    if (!fs::is_directory(a)) Refuse(option, path, p.string() + " is not a folder");
    if (::access(p.c_str(), W_OK | X_OK) != 0) Refuse(option, path, p.string() + ": " + std::strerror(errno));
    return;
  }
  Refuse(option, path, "no existing folder above it");
}

}  // namespace ot::tools
