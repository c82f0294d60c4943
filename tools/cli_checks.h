// What the command line's options may hold, checked when they are parsed (one line naming the option and the value
// given), and the output paths checked before any work starts.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace ot::tools {

// An integer option of at least `lo`: "--batch: expected an integer >= 1, got '0'".
CLI::Validator AtLeast(int64_t lo);
// A finite number > 0 (`positive`) or >= 0: "--lr: expected a finite number > 0, got 'nan'".
CLI::Validator FiniteNumber(bool positive);
// A path that is not empty: "--save: expected a path, got ''".
CLI::Validator NonEmptyPath();

// Throws Error("OPTION: cannot write 'PATH' (why)") unless `path` can be written as a file: its folder exists and
// is writable, and the path is not a folder nor a read-only file. Nothing is created.
void CheckOutputFile(const std::string& option, const std::string& path);
// The same for a folder that will be created if missing (its nearest existing ancestor must be a writable folder).
void CheckOutputDir(const std::string& option, const std::string& path);

}  // namespace ot::tools
