#include "tools/plot/python.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

namespace loom::plot {

int runPython(const char* tool, const char* script, const std::vector<std::string>& args) {
  FILE* text = std::tmpfile();
  if (text == nullptr || std::fputs(script, text) < 0 || std::fflush(text) != 0) {
    std::fprintf(stderr, "%s: cannot write the plotting script to a temporary file\n", tool);
    if (text != nullptr) std::fclose(text);
    return 2;
  }
  std::rewind(text);
  std::vector<std::string> all{"/usr/bin/python3", "-"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(::fileno(text), STDIN_FILENO);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "%s: plotting needs Debian's /usr/bin/python3\n", tool);
    ::_exit(2);
  }
  std::fclose(text);
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return 2;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 2;
}

}  // namespace loom::plot
