// Shape helpers of the kiln dialect, checked against the ONNX spec by hand.
#include "kiln/IR/KilnDialect.h"
#include "kiln/Kiln.h"

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

// Model-supplied text is escaped before it reaches a terminal (kiln/Support/DisplaySafe.h).
TEST(DisplaySafe, EscapesControlsInvalidUtf8AndBidiOverrides) {
  EXPECT_EQ(kiln::displaySafe("conv_1/weights"), "conv_1/weights");
  EXPECT_EQ(kiln::displaySafe("caf\xc3\xa9 \xe6\x97\xa5"), "caf\xc3\xa9 \xe6\x97\xa5"); // UTF-8 stays
  EXPECT_EQ(kiln::displaySafe("a\x1b[2Jb\x07"), "a\\x1b[2Jb\\x07");
  EXPECT_EQ(kiln::displaySafe("two\nlines\ttab\r"), "two\nlines\ttab\\x0d");
  EXPECT_EQ(kiln::displaySafe("\xff\xc3"), "\\xff\\xc3");         // invalid, truncated
  EXPECT_EQ(kiln::displaySafe("\xc0\xaf"), "\\xc0\\xaf");         // overlong '/'
  EXPECT_EQ(kiln::displaySafe("\xed\xa0\x80"), "\\xed\\xa0\\x80"); // a surrogate
  EXPECT_EQ(kiln::displaySafe("x\xe2\x80\xaey"), "x\\u{202e}y");  // right-to-left override
  EXPECT_EQ(kiln::displaySafe("\xc2\x9b" "31m"), "\\u{9b}31m");   // C1 CSI
  EXPECT_EQ(kiln::displaySafe(std::string(10, 'n'), 4), "nnnn...(10 bytes)");
  std::string once = kiln::displaySafe("\x1b\xff");
  EXPECT_EQ(kiln::displaySafe(once), once); // idempotent: messages may pass twice
  EXPECT_EQ(kiln::Status::error(KILN_INVALID_ARGUMENT, "node '\x1b'").message, "node '\\x1b'");
}
