// Always-on logs of recent invocations (kilnc, kiln-run, JIT compiles) for
// bug reports: `kiln-rage` lists them and archives one.
//
// Each invocation gets a folder under invocationLogDir() holding log.txt:
// the tool and its arguments (or the JIT's options), Kiln's and LLVM's
// versions, the host CPU and its features, each model's path, size and
// digest, stage timings, warnings, errors and the exit status; never tensor
// data or file contents. A pass that fails writes its MLIR reproducer
// (the IR before it and the pipeline) into the same folder.
// Only the newest KILN_LOG_MAX folders (default 50) are kept. KILN_LOG=0
// turns logging off; a folder that cannot be written turns it off too:
// logging never fails a run.
#ifndef KILN_INVOCATIONLOG_H
#define KILN_INVOCATIONLOG_H

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class InvocationLog {
public:
  /// Whom a log is current for. A tool's log (kilnc, kiln-run) lives as
  /// long as the process, and JIT compiles on any of its threads record into
  /// it. A JIT compile's own log ("jit") is current only on the thread that
  /// compiles, until it is destroyed: were it the process's, a compile on
  /// another thread would take it and write into it after it was gone.
  enum class Scope { Process, Thread };

  /// Starts the log of an invocation of `tool` (null when logging is off or
  /// impossible) and makes it current for `scope` unless one already is.
  static std::unique_ptr<InvocationLog> begin(const std::string &tool,
                                              const std::vector<std::string> &args,
                                              Scope scope = Scope::Process);
  ~InvocationLog(); // writes log.txt (with the status given to finish, else "unknown")

  void model(const std::string &path);
  void note(const std::string &key, const std::string &value);
  void stage(const std::string &name, double seconds);
  void warning(const std::string &message);
  void error(const std::string &message);
  void finish(int exitStatus);
  /// The invocation's folder (for extra files such as IR reproducers).
  const std::string &folder() const { return dir; }

  /// This thread's current log, else the process's, else null.
  static InvocationLog *current();

  struct Impl;

private:
  InvocationLog() = default;
  std::string dir;
  std::unique_ptr<Impl> impl;
};

/// Where the logs are: $KILN_LOG_DIR, else the compile cache's folder
/// ($KILN_CACHE_DIR, $XDG_CACHE_HOME/kiln or ~/.cache/kiln) + "/logs".
std::string invocationLogDir();

} // namespace kiln

#endif
