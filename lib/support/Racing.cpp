#include "kiln/Support/Racing.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

double empiricalBernsteinRadius(double variance, double range, int n, double delta) {
  if (n < 2)
    return std::numeric_limits<double>::infinity();
  double log = std::log(4.0 / delta);
  return std::sqrt(2.0 * std::max(variance, 0.0) * log / n) + 7.0 * range * log / (3.0 * (n - 1));
}

namespace {
/// One candidate's running statistics (Welford's update: timings differ
/// from their mean in the last few digits only).
struct Stats {
  int n = 0;
  double mean = 0, m2 = 0;
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double x) {
    ++n;
    double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  double variance() const { return n > 1 ? m2 / (n - 1) : 0.0; }
};
} // namespace

std::vector<int> raceCheckpoints(const RaceOptions &options) {
  int maxSamples = std::max(options.maxSamples, 2);
  int minSamples = std::clamp(options.minSamples, 2, maxSamples);
  // Few looks, so that the union bound costs little (8 up to 50 samples:
  // ln(4 x 2 x 8 / 0.05) = 6.5, against 8.3 for a look at every round).
  std::vector<int> checkpoints;
  for (double n = minSamples; n < maxSamples; n *= 1.4)
    if (checkpoints.empty() || (int)n > checkpoints.back())
      checkpoints.push_back((int)n);
  checkpoints.push_back(maxSamples);
  return checkpoints;
}

double raceLevel(int count, const RaceOptions &options) {
  return options.delta / ((double)std::max(count, 1) * raceCheckpoints(options).size());
}

RaceResult raceCandidates(int count, int defaultIndex, const std::function<double(int)> &sample,
                          const RaceOptions &options) {
  RaceResult result;
  result.samples.assign(count, 0);
  result.means.assign(count, 0.0);
  if (count <= 0)
    return result;
  if (defaultIndex < 0 || defaultIndex >= count)
    defaultIndex = 0;
  if (count == 1) {
    result.winner = 0;
    return result;
  }
  int maxSamples = std::max(options.maxSamples, 2);
  int minSamples = std::clamp(options.minSamples, 2, maxSamples);
  std::vector<int> checkpoints = raceCheckpoints(options);
  double level = raceLevel(count, options);
  std::vector<Stats> stats(count);
  std::vector<int> alive(count);
  for (int i = 0; i < count; ++i)
    alive[i] = i;
  auto lower = [&](int i) {
    return stats[i].mean -
           empiricalBernsteinRadius(stats[i].variance(), stats[i].hi - stats[i].lo, stats[i].n,
                                    level);
  };
  auto upper = [&](int i) {
    return stats[i].mean +
           empiricalBernsteinRadius(stats[i].variance(), stats[i].hi - stats[i].lo, stats[i].n,
                                    level);
  };
  bool equivalent = false;
  for (int round = 1; round <= maxSamples && alive.size() > 1; ++round) {
    for (int i : alive)
      stats[i].add(sample(i));
    if (!std::binary_search(checkpoints.begin(), checkpoints.end(), round))
      continue;
    // The best upper bound: any candidate whose lower bound is above it is
    // slower than that one with the promised confidence.
    double bestUpper = std::numeric_limits<double>::infinity();
    for (int i : alive)
      bestUpper = std::min(bestUpper, upper(i));
    std::vector<int> kept;
    for (int i : alive)
      if (lower(i) <= bestUpper)
        kept.push_back(i);
    alive = kept;
    if (alive.size() <= 1)
      break;
    // All survivors within epsilon of each other: sampling more would only
    // tell apart differences the tuner does not care about.
    double lowest = std::numeric_limits<double>::infinity(), highest = 0;
    for (int i : alive) {
      lowest = std::min(lowest, lower(i));
      highest = std::max(highest, upper(i));
    }
    if (lowest > 0 && highest <= lowest * (1 + options.epsilon)) {
      equivalent = true;
      break;
    }
  }
  for (int i = 0; i < count; ++i) {
    result.samples[i] = stats[i].n;
    result.means[i] = stats[i].mean;
    result.totalSamples += stats[i].n;
  }
  // A winner that saves less than epsilon of the default's time is not
  // worth leaving the default for, however certain the difference.
  auto keepsDefault = [&](int winner) {
    return winner != defaultIndex && stats[defaultIndex].n > 0 &&
           stats[winner].mean * (1 + options.epsilon) >= stats[defaultIndex].mean;
  };
  if (alive.size() == 1 && !equivalent) {
    result.winner = alive[0];
    result.separated = true;
    if (keepsDefault(result.winner)) {
      result.winner = defaultIndex;
      result.separated = false;
    }
    return result;
  }
  // Equivalent survivors: the default when it is one of them.
  if (std::find(alive.begin(), alive.end(), defaultIndex) != alive.end()) {
    result.winner = defaultIndex;
    return result;
  }
  result.winner = *std::min_element(alive.begin(), alive.end(), [&](int a, int b) {
    return stats[a].mean < stats[b].mean;
  });
  if (keepsDefault(result.winner))
    result.winner = defaultIndex;
  return result;
}

} // namespace kiln
