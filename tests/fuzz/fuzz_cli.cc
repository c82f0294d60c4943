// libFuzzer target: arbitrary bytes as onnx-train's command line (arguments split at NUL bytes), parsed by the
// command line main() uses. Parsing must either succeed or throw CLI::ParseError (a one-line error, exit 1); no
// command runs.
#include <cstdint>
#include <string>
#include <vector>

#include "tools/command_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"onnx-train"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  auto cl = ot::tools::MakeCommandLine();
  try {
    cl->app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    // One line, unless a line break came with the arguments themselves (messages quote the value given).
    bool typed_newline = false;
    for (const std::string& a : args) typed_newline |= a.find('\n') != std::string::npos;
    if (!typed_newline && e.get_exit_code() != 0 && std::string(e.what()).find('\n') != std::string::npos)
      __builtin_trap();
  }
  return 0;
}
