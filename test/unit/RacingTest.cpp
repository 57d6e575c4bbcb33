// The tuner's stopping rule (kiln/Support/Racing.h) on simulated timings
// with known means and noise: it must pick the faster candidate at the
// promised rate, stop early when the gap is large, and keep the default
// when the candidates are the same.
#include "kiln/Support/Racing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace kiln;

namespace {

/// Timings mean x (1 + uniform(-noise, noise)), and with probability
/// `spikes` three times that (a preempted run).
struct Simulated {
  std::vector<double> means;
  double noise;
  double spikes = 0;
  std::mt19937_64 rng;
  Simulated(std::vector<double> means, double noise, uint64_t seed, double spikes = 0)
      : means(std::move(means)), noise(noise), spikes(spikes), rng(seed) {}
  double operator()(int i) {
    std::uniform_real_distribution<double> u(-noise, noise), p(0, 1);
    double t = means[i] * (1 + u(rng));
    return p(rng) < spikes ? 3 * t : t;
  }
};

RaceResult race(Simulated &s, int defaultIndex, const RaceOptions &o = {}) {
  return raceCandidates((int)s.means.size(), defaultIndex, [&](int i) { return s(i); }, o);
}

} // namespace

// delta 0.4: ln(4 / 0.4) = ln 10; sqrt(2 x 0.04 x ln 10 / 10) + 7 x 1 x
// ln 10 / (3 x 9), by hand: sqrt(0.0184207) = 0.135723, 16.118 / 27 =
// 0.596966; the sum 0.732689.
TEST(Racing, EmpiricalBernsteinRadius) {
  EXPECT_NEAR(empiricalBernsteinRadius(0.04, 1.0, 10, 0.4), 0.732689, 1e-5);
  EXPECT_TRUE(std::isinf(empiricalBernsteinRadius(0.04, 1.0, 1, 0.4)));
}

// The union bound by hand: checkpoints 5, 7, 9, 13, 19, 26, 37 (x 1.4,
// truncated) and the budget 50: eight looks; three candidates at delta
// 0.05: 0.05 / 24.
TEST(Racing, UnionBoundOverCandidatesAndLooks) {
  EXPECT_EQ(raceCheckpoints(RaceOptions()), (std::vector<int>{5, 7, 9, 13, 19, 26, 37, 50}));
  EXPECT_DOUBLE_EQ(raceLevel(3, RaceOptions()), 0.05 / 24);
  RaceOptions few;
  few.minSamples = 4;
  few.maxSamples = 6;
  EXPECT_EQ(raceCheckpoints(few), (std::vector<int>{4, 5, 6}));
}

// A 30 % gap with 3 % noise: decided by the fourth look (13 samples each),
// far below the budget and a fixed-sample baseline's 100 per candidate.
TEST(Racing, StopsEarlyWhenTheGapIsLarge) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Simulated s({1.3, 1.0, 1.6}, 0.03, seed);
    RaceResult r = race(s, 0);
    EXPECT_EQ(r.winner, 1);
    EXPECT_TRUE(r.separated);
    EXPECT_LE(r.samples[1], 13) << "seed " << seed;
    EXPECT_LE(r.totalSamples, 3 * 13) << "seed " << seed;
    for (int n : r.samples)
      EXPECT_GE(n, RaceOptions().minSamples);
  }
}

// A 15 % gap with 5 % noise: the faster one, separated, nearly always
// (the rule may stop at the budget undecided; then the default, here the
// slower one, stands).
TEST(Racing, FindsAModestGap) {
  int separated = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Simulated s({1.15, 1.0}, 0.05, seed);
    RaceResult r = race(s, 0);
    if (r.separated) {
      ++separated;
      EXPECT_EQ(r.winner, 1) << "seed " << seed;
    } else {
      EXPECT_EQ(r.winner, 0) << "seed " << seed;
    }
  }
  EXPECT_GE(separated, 190);
}

// The promised rate: with a gap the budget cannot resolve (2 %, 5 % noise)
// and with no gap at all, a race must not declare the wrong (or any) winner
// separated more often than delta. Equivalent candidates keep the default.
TEST(Racing, WrongAnswersAtMostDelta) {
  const int races = 400;
  RaceOptions o;
  o.epsilon = 0; // no equivalence and no keeping the default to hide a wrong pick
  int wrong = 0;
  for (uint64_t seed = 1; seed <= races; ++seed) {
    Simulated s({1.0, 1.02}, 0.05, seed);
    RaceResult r = race(s, 1, o);
    if (r.separated && r.winner != 0)
      ++wrong;
    if (!r.separated)
      EXPECT_EQ(r.winner, 1);
  }
  EXPECT_LE(wrong, o.delta * races);
  int separatedTies = 0, keptDefault = 0;
  for (uint64_t seed = 1; seed <= races; ++seed) {
    Simulated s({1.0, 1.0, 1.0}, 0.05, 1000 + seed);
    RaceResult r = race(s, 2, o);
    separatedTies += r.separated;
    keptDefault += r.winner == 2;
  }
  EXPECT_LE(separatedTies, o.delta * races);
  EXPECT_GE(keptDefault, (1 - o.delta) * races);
}

// Identical candidates with little noise are declared equivalent within
// epsilon before the budget runs out.
TEST(Racing, EquivalentWithinEpsilonStopsEarly) {
  Simulated s({1.0, 1.0}, 0.002, 7);
  RaceResult r = race(s, 1);
  EXPECT_FALSE(r.separated);
  EXPECT_EQ(r.winner, 1);
  EXPECT_LT(r.samples[0], RaceOptions().maxSamples);
}

// No candidate is sampled beyond the budget; spikes (5 % of samples three
// times as slow) widen the intervals, which delays decisions but makes no
// wrong one: the candidate 30 % slower is never declared the winner. The
// tuner's samples are medians of three calls, which removes lone spikes:
// with those, the slower default is dropped in at least 85 of 100 races
// (66 of 100 keep it on raw samples).
TEST(Racing, BudgetAndSpikes) {
  RaceOptions o;
  o.maxSamples = 30;
  int keptRaw = 0, keptMedians = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    Simulated s({1.0, 1.3, 1.01}, 0.04, seed, 0.05);
    RaceResult r = race(s, 1, o);
    for (int n : r.samples)
      EXPECT_LE(n, 30);
    EXPECT_FALSE(r.separated && r.winner == 1) << "seed " << seed;
    keptRaw += r.winner == 1;
    RaceResult m = raceCandidates(
        3, 1,
        [&](int i) {
          double t[3] = {s(i), s(i), s(i)};
          std::sort(t, t + 3);
          return t[1];
        },
        o);
    EXPECT_FALSE(m.separated && m.winner == 1) << "seed " << seed;
    keptMedians += m.winner == 1;
  }
  EXPECT_LE(keptMedians, 15);
  EXPECT_LT(keptMedians, keptRaw);
}

// A difference below epsilon is not worth a change: 1 % faster with
// almost no noise is certain, yet the default stays the choice.
TEST(Racing, KeepsTheDefaultForLessThanEpsilon) {
  Simulated s({1.0, 0.99}, 0.001, 11);
  RaceResult r = race(s, 0);
  EXPECT_EQ(r.winner, 0);
  EXPECT_FALSE(r.separated);
  Simulated faster({1.0, 0.95}, 0.001, 12);
  EXPECT_EQ(race(faster, 0).winner, 1);
}

TEST(Racing, OneCandidateNeedsNoSamples) {
  RaceResult r = raceCandidates(1, 0, [](int) { return 1.0; });
  EXPECT_EQ(r.winner, 0);
  EXPECT_EQ(r.totalSamples, 0);
}
