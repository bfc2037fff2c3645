// Reference files that Python writes for equality tests (transformers, tokenizers, sentencepiece),
// made once per build tree rather than once per test process: ctest runs every test in a process
// of its own, and eleven tests read hf_reference.py's 5-second output alone.
//
// A reference lives in <build>/tests/references/<script>-<hash of the python, the modules and their
// versions, the arguments and the scripts' text>/. The first process to want it makes it under an exclusive lock
// (flock on <dir>.lock), into <dir>.partial-<pid>, renamed into place when the script succeeds; the
// others wait on the lock and read it. Editing a script, its arguments or the python changes the
// directory. Tests only read a reference (copy it to change it).
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

namespace hwt::testing {

// The installed versions of `modules` (comma-separated; google.protobuf is the distribution
// protobuf) as the test python reports them, or "" when it cannot: part of a reference's key, so
// that an upgraded transformers makes the reference again.
inline std::string python_module_versions(const std::string& modules) {
  const std::string cmd = std::string(HWTRAIN_PYTHON) +
                          " -c 'import importlib.metadata as m, sys; "
                          "print(*(m.version(n.strip().split(\".\")[-1]) for n in sys.argv[1].split(\",\")))' '" +
                          modules + "' 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    if (::pclose(p) != 0) out.clear();
  }
  return out;
}

// Runs tests/<script> with the test python into the cache directory (script OUT_DIR args) unless
// it is there, when the python imports `module` (comma-separated names); the directory, or "" when
// the python lacks a module (the tests then skip, saying so) or the script fails.
inline std::string python_reference(const std::string& module, const std::string& script, const std::string& args) {
  namespace fs = std::filesystem;
  const fs::path source = fs::path(HWTRAIN_SOURCE_DIR) / "tests" / script;
  // The key: the python and the modules it must import (and their versions), the arguments, and the
  // text of every script beside this one (hf_sentencepiece_reference.py imports hf_tokenizers_reference.py).
  std::string text =
      std::string(HWTRAIN_PYTHON) + '\0' + module + '\0' + python_module_versions(module) + '\0' + args;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(source.parent_path(), ec)) {
    if (entry.path().extension() != ".py") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    text += '\0' + entry.path().filename().string() + '\0' + std::string(std::istreambuf_iterator<char>(in), {});
  }
  const size_t key = std::hash<std::string>{}(text);
  const fs::path cache = fs::path(HWTRAIN_TEST_REFERENCES);
  const fs::path dir = cache / (source.stem().string() + "-" + std::to_string(key));
  fs::create_directories(cache, ec);
  const int lock = ::open((dir.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0) return std::string();
  if (::flock(lock, LOCK_EX) != 0) {
    ::close(lock);
    return std::string();
  }
  if (!fs::is_directory(dir)) {
    const fs::path partial = dir.string() + ".partial-" + std::to_string(::getpid());
    fs::remove_all(partial, ec);
    fs::create_directories(partial, ec);
    const std::string cmd = std::string(HWTRAIN_PYTHON) + " -c 'import " + module + "' 2>/dev/null && " +
                            HWTRAIN_PYTHON + " '" + source.string() + "' '" + partial.string() + "' " + args;
    if (std::system(cmd.c_str()) == 0) fs::rename(partial, dir, ec);
    if (!fs::is_directory(dir)) fs::remove_all(partial, ec);
  }
  ::close(lock);  // releases the lock
  return fs::is_directory(dir) ? dir.string() : std::string();
}

}  // namespace hwt::testing
