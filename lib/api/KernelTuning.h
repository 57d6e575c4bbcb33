// Kernel choices tuned per machine (kilnc --tune, kiln-run --tune,
// kiln.compile(..., tune=True)): each convolution layer's schedule (the
// order of its work items, the size of its pixel blocks; kiln/kernels.h)
// timed on this machine at the layer's real shape and thread count, the
// candidates raced until a confidence bound separates them
// (kiln/Support/Racing.h). Choices are kept in the compile cache keyed by
// the CPU and the layer, so a machine pays for a layer once; a compile
// with stored choices is deterministic.
#ifndef KILN_API_KERNELTUNING_H
#define KILN_API_KERNELTUNING_H

#include "kiln/Support/Racing.h"
#include "kiln/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class TargetMachine;
}
namespace mlir {
class ModuleOp;
}
namespace kiln {

class CompileCache;
class StageClock;
struct EmitOptions;
struct LoweringOptions;

struct TunedLayer {
  std::string layer;    ///< its name (kKernelLayerAttr)
  int64_t schedule = 0; ///< the chosen KILN_CONV_SCHEDULE_BITS; 0: the default
  bool cached = false;  ///< read from the cache, not timed now
  bool separated = false; ///< the choice beat every other with confidence
  int candidates = 0;
  int samples = 0;        ///< samples raced (each the median of 3 calls)
  int64_t calls = 0;      ///< kernel calls timed for it (0 when cached)
  double defaultSeconds = 0, chosenSeconds = 0; ///< mean time per call
  /// Each candidate's schedule, mean time per call and samples (empty
  /// when cached).
  struct Candidate {
    int64_t schedule;
    double seconds;
    int samples;
  };
  std::vector<Candidate> raced;
};

struct TuningReport {
  std::vector<TunedLayer> layers;
  double seconds = 0;        ///< spent tuning (not counting cached layers)
  int64_t samples = 0, calls = 0; ///< raced, and kernel calls timed
  /// What a fixed-sample baseline (100 per candidate) would take.
  int64_t baselineSamples = 0;
  /// "tuned 21 layers (3 from the cache) in 4.2 s: 5 changed, est. 1.9 ms
  /// (6 %) less per run of them; 1160 samples (3500 kernel calls), 13 % of
  /// the 8600 of 100 samples per candidate", then a line per layer.
  std::string summary() const;
};

/// Runs `options`' lowering to linalg on a copy of `module` (which marks
/// the tunable layers), tunes each layer on this machine through the
/// runtime's kernels on `threads` threads (0: physical cores) as a run
/// would call them, and sets the choices that differ from the default as
/// `module`'s kKernelChoicesAttr. `cache` (may be null) keeps and supplies
/// choices.
Status tuneModuleKernels(mlir::ModuleOp module, const LoweringOptions &options,
                         const llvm::TargetMachine &tm, int threads, const CompileCache *cache,
                         const RaceOptions &race, TuningReport &report);

/// Whether EmitOptions::tune can apply: compiled CPU code (llvm, asm, obj,
/// bundle) for this machine. emit and emitBundle check it first, so that a
/// wrong target fails before the lowering.
Status checkTuneOptions(const EmitOptions &options);

/// EmitOptions::tune (kilnc --tune, bundles): tuneModuleKernels on the
/// host, timed on EmitOptions::tuneThreads threads, with the compile cache
/// when options.cache; then `clock` reports it. A target other than this
/// machine is refused: the choices are measured here.
Status tuneForEmit(mlir::ModuleOp module, const LoweringOptions &lowering,
                   const llvm::TargetMachine &tm, const EmitOptions &options,
                   StageClock &clock);

/// The candidates for a convolution layer's schedule: each distinct way to
/// cut and order its items (schedules that give the same items in the same
/// order are one), the default (schedule 0) first.
std::vector<int64_t> convScheduleCandidates(const int64_t (&fields)[17]);

} // namespace kiln

#endif
