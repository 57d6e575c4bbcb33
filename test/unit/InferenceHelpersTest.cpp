// Shape helpers of the kiln dialect, checked against the ONNX spec by hand.
#include "kiln/IR/KilnDialect.h"

#include <gtest/gtest.h>

using mlir::ShapedType;

TEST(Broadcast, OnnxMultidirectionalRules) {
  llvm::SmallVector<int64_t> out;
  ASSERT_TRUE(mlir::succeeded(kiln::broadcastShapes({2, 1, 4}, {3, 1}, out)));
  EXPECT_EQ(out, (llvm::SmallVector<int64_t>{2, 3, 4}));
  ASSERT_TRUE(mlir::succeeded(kiln::broadcastShapes({}, {5}, out)));
  EXPECT_EQ(out, (llvm::SmallVector<int64_t>{5}));
  EXPECT_TRUE(mlir::failed(kiln::broadcastShapes({2, 3}, {4, 3}, out)));
}

TEST(Broadcast, UnknownDims) {
  llvm::SmallVector<int64_t> out;
  int64_t dyn = ShapedType::kDynamic;
  ASSERT_TRUE(mlir::succeeded(kiln::broadcastShapes({dyn, 1}, {1, 7}, out)));
  EXPECT_EQ(out, (llvm::SmallVector<int64_t>{dyn, 7}));
  // A known dim other than 1 decides.
  ASSERT_TRUE(mlir::succeeded(kiln::broadcastShapes({dyn}, {6}, out)));
  EXPECT_EQ(out, (llvm::SmallVector<int64_t>{6}));
}

TEST(SliceBounds, ClampsLikeTheSpec) {
  // x[1:1000] of 10 -> start 1, 9 elements.
  auto b = kiln::computeSliceBounds(10, 1, 1000, 1);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->start, 1);
  EXPECT_EQ(b->size, 9);
  // x[-3:] step 2 of 10 -> indices 7, 9.
  b = kiln::computeSliceBounds(10, -3, INT64_MAX, 2);
  EXPECT_EQ(b->start, 7);
  EXPECT_EQ(b->size, 2);
  // x[::-1] of 4 -> start 3, 4 elements (end INT64_MIN clamps to -1).
  b = kiln::computeSliceBounds(4, -1, INT64_MIN, -1);
  EXPECT_EQ(b->start, 3);
  EXPECT_EQ(b->size, 4);
  // Empty range and zero step.
  b = kiln::computeSliceBounds(5, 4, 2, 1);
  EXPECT_EQ(b->size, 0);
  EXPECT_FALSE(kiln::computeSliceBounds(5, 0, 5, 0));
}
