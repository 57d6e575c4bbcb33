// kiln-run's command line: llvm::cl options, as kilnc has them, checked and
// gathered into one RunOptions.
#ifndef KILN_TOOLS_KILN_RUN_RUNOPTIONS_H
#define KILN_TOOLS_KILN_RUN_RUNOPTIONS_H

#include "kiln/Kiln.h"

#include <map>
#include <string>
#include <vector>

struct RunOptions {
  std::string modelPath, inputsDir, outputsDir, checkDir, profilePath;
  std::string device = "cpu";
  std::map<std::string, std::string> inputFiles;         ///< --input NAME=FILE
  std::map<std::string, std::vector<int64_t>> shapes;    ///< --shape NAME=DIMS
  bool randomFill = true, npy = false, checkFinite = false, verify = false;
  unsigned long long seed = 0;
  double atol = 1e-4, rtol = 1e-3;
  long bench = 0;
  kiln::CompileOptions compile;
};

/// Parses the command line into `out`. Returns -1 when the run goes on, else
/// the exit status: 0 after --help or --version, 2 on bad usage (the error
/// printed).
int parseRunOptions(int argc, char **argv, RunOptions &out);

/// Prints "kiln-run: error: MSG" and where to read the usage; returns 2,
/// kiln-run's exit status for bad usage.
int usageError(const std::string &msg);

#endif
