// Racing candidates by their measured times: which of several equivalent
// ways to run a layer is fastest, sampling no more than it takes to know.
// The kernel tuner (lib/api/KernelTuning.cpp) races a layer's schedules;
// no LLVM/MLIR here, so the stopping rule is unit-tested on simulated
// timings (test/unit/RacingTest.cpp).
#ifndef KILN_SUPPORT_RACING_H
#define KILN_SUPPORT_RACING_H

#include <functional>
#include <vector>

namespace kiln {

struct RaceOptions {
  /// The race's error rate: a candidate is dropped only when its
  /// confidence interval lies wholly above another's, every interval at
  /// level 1 - delta / (count x checkpoints) (raceLevel: a union bound over
  /// the candidates and the rounds at which the race looks). The bound
  /// holds for samples within a range known in advance; timings have none,
  /// so the range used is the one observed (see raceCandidates), and delta
  /// is the nominal rate, which the unit tests check on simulated timings.
  double delta = 0.05;
  /// Candidates whose intervals still overlap when sampling stops are
  /// equivalent: the default one wins if it is among them (a tuned layer
  /// then compiles as an untuned one), else the lowest mean. They are
  /// declared equivalent before the budget when every survivor's interval
  /// lies within epsilon (relative) of the best's lower bound. A winner
  /// whose mean is within epsilon of the default's leaves the default the
  /// choice, however certain the difference.
  double epsilon = 0.02;
  /// Samples of every candidate before any decision (the intervals' range
  /// term needs a few).
  int minSamples = 5;
  /// The budget: samples of one candidate at most (half a fixed-sample
  /// baseline's 100).
  int maxSamples = 50;
};

struct RaceResult {
  int winner = 0;
  /// The winner's interval lies below every other candidate's (false: the
  /// survivors were equivalent, within the budget or within epsilon).
  bool separated = false;
  /// Samples taken of each candidate, and in all.
  std::vector<int> samples;
  int totalSamples = 0;
  /// Each candidate's mean of its samples (seconds, as `sample` returns).
  std::vector<double> means;
};

/// The half-width of a two-sided empirical-Bernstein confidence interval
/// (Maurer and Pontil 2009, theorem 4, each side at delta / 2) for the
/// mean of n samples with sample variance `variance` in a range of width
/// `range`, at confidence 1 - delta:
///   sqrt(2 variance ln(4/delta) / n) + 7 range ln(4/delta) / (3 (n - 1)).
double empiricalBernsteinRadius(double variance, double range, int n, double delta);

/// Races `count` candidates: each round samples every surviving candidate
/// once (interleaved, so that a machine's slow phases fall on all of them
/// alike); at checkpoints (minSamples, then every 1.4x more, and the
/// budget) it drops every candidate whose empirical-Bernstein interval
/// lies above the best one's. Stops when one survives, when the survivors
/// are within epsilon, or at the budget. `sample(i)` times candidate i
/// once; a caller whose timings have spikes should make a sample robust
/// itself (the tuner's is the median of three calls). The range in each
/// interval is the candidate's observed range (max - min of its samples):
/// a spike widens it, which only delays decisions.
RaceResult raceCandidates(int count, int defaultIndex, const std::function<double(int)> &sample,
                          const RaceOptions &options = {});

/// The rounds after which the race looks (minSamples, then every 1.4x
/// more, and maxSamples), and the level of each interval for `count`
/// candidates: delta / (count x checkpoints).
std::vector<int> raceCheckpoints(const RaceOptions &options);
double raceLevel(int count, const RaceOptions &options);

} // namespace kiln

#endif
