// TfIdfVectorizer over integer tokens (pool_int64s; string pools are not
// supported). For each n-gram length n and skip s, the n shifted slices of
// the input are compared with the k-th tokens of all the pool's n-grams at
// once ([N, M, L] comparisons), ANDed over k and summed over positions,
// giving the counts of every n-gram of that length; a constant 0/1 matrix
// then adds the counts into their output columns with one MatMul. The IR
// stays the same size whatever the pool's size.
#include "NodeImporter.h"

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

LogicalResult tfIdfVectorizer(NodeImporter &n, Outs &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape() || t.getRank() < 1 || t.getRank() > 2 ||
      !isa<IntegerType>(t.getElementType()))
    return n.error("TfIdfVectorizer needs integer tokens [C] or [N, C] of static shape");
  if (n.attr("pool_strings"))
    return n.error("TfIdfVectorizer over strings is not supported");
  auto pool = n.getInts("pool_int64s"), counts = n.getInts("ngram_counts"),
       indexes = n.getInts("ngram_indexes");
  if (!pool || !counts || !indexes)
    return n.error("TfIdfVectorizer needs pool_int64s, ngram_counts and ngram_indexes");
  int64_t minN = n.getInt("min_gram_length", 1), maxN = n.getInt("max_gram_length", 1),
          maxSkip = n.getInt("max_skip_count", 0);
  std::string mode = n.getString("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    return n.error("unknown TfIdfVectorizer mode '" + mode + "'");
  if (minN < 1 || maxN < minN || maxN > (int64_t)counts->size() || maxSkip < 0)
    return n.error("TfIdfVectorizer's gram lengths or skip count are out of range");

  // The pool's n-grams, length by length: group g (n = g + 1) starts at
  // pool item counts[g].
  int64_t outCols = 0;
  for (int64_t idx : *indexes) {
    if (idx < 0 || idx >= (int64_t(1) << 24))
      return n.error("ngram_indexes has the entry " + Twine(idx) + ", outside [0, 2^24)");
    outCols = std::max(outCols, idx + 1);
  }
  if (outCols > (int64_t(1) << 24) || (int64_t)indexes->size() * outCols > (int64_t(1) << 28))
    return n.error("ngram_indexes make an output of " + Twine(outCols) + " columns, over Kiln's "
                   "limit");
  auto weights = n.getFloats("weights");
  int64_t totalGrams = 0;
  struct Group { int64_t n, firstItem, grams, firstGram; };
  SmallVector<Group> groups;
  for (size_t g = 0; g < counts->size(); ++g) {
    int64_t begin = (*counts)[g];
    int64_t end = g + 1 < counts->size() ? (*counts)[g + 1] : (int64_t)pool->size();
    int64_t len = g + 1;
    if (begin < 0 || end < begin || end > (int64_t)pool->size() || (end - begin) % len)
      return n.error("ngram_counts does not divide the pool into whole n-grams");
    groups.push_back({len, begin, (end - begin) / len, totalGrams});
    totalGrams += (end - begin) / len;
  }
  if ((int64_t)indexes->size() != totalGrams)
    return n.error("ngram_indexes has " + Twine(indexes->size()) + " entries for " +
                   Twine(totalGrams) + " n-grams");
  if (weights && (int64_t)weights->size() != totalGrams)
    return n.error("weights has " + Twine(weights->size()) + " entries for " +
                   Twine(totalGrams) + " n-grams");

  bool batched = t.getRank() == 2;
  int64_t rows = batched ? t.getDimSize(0) : 1, C = t.getDimSize(t.getRank() - 1);
  Value x2 = batched ? x : n.make<UnsqueezeOp>(x, n.b.getDenseI64ArrayAttr({0}));
  x2 = n.make<CastOp>(x2, TypeAttr::get(n.b.getI64Type()));
  Type f32 = n.b.getF32Type();
  SmallVector<Value> perGroup; // [rows, grams of the group] counts
  SmallVector<int64_t> groupGrams;
  for (const Group &g : groups) {
    if (g.n < minN || g.n > maxN || g.grams == 0)
      continue;
    Value total;
    // Unigrams have no gaps: one pass. Longer n-grams: one pass per skip.
    for (int64_t s = 0; s <= (g.n == 1 ? 0 : maxSkip); ++s) {
      int64_t span = (g.n - 1) * (s + 1), L = C - span;
      if (L <= 0)
        break;
      Value match;
      for (int64_t k = 0; k < g.n; ++k) {
        int64_t start = k * (s + 1);
        Value slice = n.make<SliceOp>(x2, n.i64Tensor({start}), n.i64Tensor({start + L}),
                                      n.i64Tensor({1}), n.i64Tensor({1}));
        slice = n.make<UnsqueezeOp>(slice, n.b.getDenseI64ArrayAttr({1})); // [rows, 1, L]
        SmallVector<int64_t> tokens;
        for (int64_t m = 0; m < g.grams; ++m)
          tokens.push_back((*pool)[g.firstItem + m * g.n + k]);
        Value gram = n.constant(DenseIntElementsAttr::get(
            RankedTensorType::get({1, g.grams, 1}, n.b.getI64Type()), ArrayRef<int64_t>(tokens)));
        Value eq = n.make<EqualOp>(slice, gram); // [rows, grams, L]
        match = match ? n.make<AndOp>(match, eq) : eq;
      }
      Value c = n.make<ReduceSumOp>(n.make<CastOp>(match, TypeAttr::get(f32)),
                                    n.b.getDenseI64ArrayAttr({2}), n.b.getBoolAttr(false));
      total = total ? n.make<AddOp>(total, c) : c;
    }
    if (!total)
      total = n.constant(DenseElementsAttr::get(RankedTensorType::get({rows, g.grams}, f32), 0.0f));
    perGroup.push_back(total);
    groupGrams.push_back(g.firstGram);
  }
  if (n.failed())
    return failure();

  // Counts [rows, grams] -> output columns, weighted for IDF / TFIDF.
  SmallVector<float> scatter;
  SmallVector<Value> parts;
  for (auto [i, counts] : llvm::enumerate(perGroup)) {
    int64_t grams = NodeImporter::rankedType(counts).getDimSize(1);
    SmallVector<float> m(grams * outCols, 0.0f);
    for (int64_t j = 0; j < grams; ++j) {
      int64_t gi = groupGrams[i] + j;
      m[j * outCols + (*indexes)[gi]] = weights && mode != "TF" ? (*weights)[gi] : 1.0f;
    }
    Value c = mode == "IDF" ? n.make<CastOp>(n.make<GreaterOp>(counts, n.scalarLike(counts, 0)),
                                             TypeAttr::get(f32))
                            : counts;
    Value mat = n.constant(DenseElementsAttr::get(RankedTensorType::get({grams, outCols}, f32),
                                                  ArrayRef<float>(m)));
    parts.push_back(n.make<MatMulOp>(c, mat));
  }
  Value y;
  for (Value p : parts)
    y = y ? n.make<AddOp>(y, p) : p;
  if (!y)
    y = n.constant(DenseElementsAttr::get(RankedTensorType::get({rows, outCols}, f32), 0.0f));
  if (!batched)
    y = n.make<SqueezeOp>(y, n.b.getDenseI64ArrayAttr({0}));
  out.push_back(y);
  return failure(n.failed());
}

} // namespace

void addTfIdfRules(std::vector<ImportRule> &rules) {
  rules.push_back({"TfIdfVectorizer", 9, kMaxSupportedOpset, tfIdfVectorizer});
}

} // namespace kiln
