// Einsum with one or two operands, decomposed into kiln ops:
//   - a label repeated within an operand (a diagonal) multiplies by an
//     identity mask and sums one of the two axes away;
//   - labels that appear in no other operand and not in the output are
//     summed;
//   - two operands contract as one batched matmul: A is permuted to
//     [batch, left, contracted] and B to [batch, contracted, right], both
//     reshaped to 3-D, multiplied, reshaped back and permuted to the output.
// Det, the other linear-algebra operator, is here too.
#include "NodeImporter.h"

#include <numeric>

using namespace mlir;

namespace kiln {
namespace {

using Outs = SmallVectorImpl<Value>;

struct Term {
  Value value;
  std::string labels; // one char per axis
};

/// Expands "..." into capital letters (which ONNX equations never use for
/// ordinary labels) so that every axis has a single-character label.
std::string expandEllipsis(std::string spec, int64_t rank, int64_t &ellipsisRank) {
  size_t at = spec.find("...");
  if (at == std::string::npos)
    return spec;
  int64_t named = (int64_t)spec.size() - 3;
  ellipsisRank = rank - named;
  std::string batch;
  for (int64_t i = 0; i < ellipsisRank; ++i)
    batch += char('A' + i);
  return spec.substr(0, at) + batch + spec.substr(at + 3);
}

Value permute(NodeImporter &n, Term &t, const std::string &order) {
  SmallVector<int64_t> perm;
  for (char c : order)
    perm.push_back(t.labels.find(c));
  bool identity = llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()));
  t.value = identity ? t.value : n.make<TransposeOp>(t.value, n.b.getDenseI64ArrayAttr(perm));
  t.labels = order;
  return t.value;
}

/// Takes diagonals of repeated labels and sums labels used nowhere else.
LogicalResult simplify(NodeImporter &n, Term &t, const std::string &keep) {
  for (size_t i = 0; i < t.labels.size(); ++i) {
    size_t j = t.labels.find(t.labels[i], i + 1);
    if (j == std::string::npos)
      continue;
    auto type = NodeImporter::rankedType(t.value);
    if (!type || type.isDynamicDim(i) || type.getDimSize(i) != type.getDimSize(j))
      return n.error("Einsum diagonal over axes of different or unknown sizes");
    int64_t d = type.getDimSize(i);
    SmallVector<int64_t> maskShape(type.getRank(), 1);
    maskShape[i] = maskShape[j] = d;
    SmallVector<bool> eye;
    for (int64_t a = 0; a < d; ++a)
      for (int64_t b = 0; b < d; ++b)
        eye.push_back(a == b);
    Value mask = n.constant(
        DenseElementsAttr::get(RankedTensorType::get(maskShape, n.b.getI1Type()), eye));
    Value masked = n.make<SelectOp>(mask, t.value, n.scalarLike(t.value, 0));
    t.value = n.make<ReduceSumOp>(masked, n.b.getDenseI64ArrayAttr({(int64_t)j}),
                                  n.b.getBoolAttr(false));
    t.labels.erase(j, 1);
    --i;
  }
  SmallVector<int64_t> summed;
  std::string rest;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep.find(t.labels[i]) == std::string::npos)
      summed.push_back(i);
    else
      rest += t.labels[i];
  }
  if (!summed.empty())
    t.value = n.make<ReduceSumOp>(t.value, n.b.getDenseI64ArrayAttr(summed), n.b.getBoolAttr(false));
  t.labels = rest;
  return success();
}

int64_t product(RankedTensorType t, const std::string &labels, const std::string &which) {
  int64_t p = 1;
  for (char c : which)
    p *= t.getDimSize(labels.find(c));
  return p;
}

/// The product of `v`'s dims [from, to) as a 1-element i64 tensor: a
/// Shape slice per dim, multiplied, which kiln-symbolic-dims follows as an
/// expression of the inputs' dims (a batch of attention windows in a model
/// compiled for every batch: MaxViT's dims are all unknown at import).
Value groupSize(NodeImporter &n, Value v, int64_t from, int64_t to) {
  auto i64 = [&](int64_t x) { return n.b.getI64IntegerAttr(x); };
  Value size;
  for (int64_t d = from; d < to; ++d) {
    Value dim = n.make<ShapeOp>(v, i64(d), i64(d + 1));
    size = size ? n.make<MulOp>(size, dim) : dim;
  }
  return size ? size : n.i64Tensor({1});
}

LogicalResult einsum(NodeImporter &n, Outs &out) {
  std::string eq;
  for (char c : n.getString("equation", ""))
    if (c != ' ')
      eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::string output;
  if (arrow != std::string::npos) {
    output = eq.substr(arrow + 2);
  } else {
    // Implicit output: the labels that appear once, in alphabetical order.
    if (lhs.find("...") != std::string::npos)
      return n.error("implicit-output Einsum with '...' is not supported");
    for (char c = 'a'; c <= 'z'; ++c)
      if (std::count(lhs.begin(), lhs.end(), c) == 1)
        output += c;
    for (char c = 'A'; c <= 'Z'; ++c)
      if (std::count(lhs.begin(), lhs.end(), c) == 1)
        output += c;
  }
  SmallVector<std::string> specs;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    specs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (specs.size() != n.numInputs() || specs.size() > 2)
    return n.error("Einsum with " + Twine(specs.size()) +
                   " operands is not supported (one or two are)");
  SmallVector<Term> terms;
  int64_t ellipsisRank = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    Value v = n.required(i);
    auto t = NodeImporter::rankedType(v);
    if (!t)
      return n.error("Einsum needs operands of known rank");
    std::string labels = expandEllipsis(specs[i], t.getRank(), ellipsisRank);
    if ((int64_t)labels.size() != t.getRank())
      return n.error("Einsum operand " + Twine(i) + " has rank " + Twine(t.getRank()) +
                     " but '" + specs[i] + "' names " + Twine(labels.size()) + " axes");
    terms.push_back({v, labels});
  }
  output = expandEllipsis(output, (int64_t)output.size() - 3 + ellipsisRank, ellipsisRank);

  // Labels each term must keep: those in the output or in the other term.
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string keep = output + (terms.size() == 2 ? terms[1 - i].labels : "");
    if (failed(simplify(n, terms[i], keep)))
      return failure();
  }
  Term result = terms[0];
  if (terms.size() == 2) {
    Term &a = terms[0], &b = terms[1];
    std::string batch, left, right, contracted;
    for (char c : a.labels) {
      bool inB = b.labels.find(c) != std::string::npos;
      bool inOut = output.find(c) != std::string::npos;
      (inB ? (inOut ? batch : contracted) : left) += c;
    }
    for (char c : b.labels)
      if (a.labels.find(c) == std::string::npos)
        right += c;
    permute(n, a, batch + left + contracted);
    permute(n, b, batch + contracted + right);
    auto at = NodeImporter::rankedType(a.value), bt = NodeImporter::rankedType(b.value);
    if (!at || !bt)
      return failure();
    auto noZero = n.b.getBoolAttr(false);
    // Reshape targets: constants when every dim is known, else computed
    // from the permuted operands' dims (batch, left and contracted dims of
    // A; right dims of B).
    Value aShape, bShape, outShape;
    if (at.hasStaticShape() && bt.hasStaticShape()) {
      int64_t B = product(at, a.labels, batch), M = product(at, a.labels, left),
              K = product(at, a.labels, contracted), N = product(bt, b.labels, right);
      SmallVector<int64_t> shape;
      for (char c : batch + left)
        shape.push_back(at.getDimSize(a.labels.find(c)));
      for (char c : right)
        shape.push_back(bt.getDimSize(b.labels.find(c)));
      aShape = n.i64Tensor({B, M, K});
      bShape = n.i64Tensor({B, K, N});
      outShape = n.i64Tensor(shape);
    } else {
      auto i64 = [&](int64_t x) { return n.b.getI64IntegerAttr(x); };
      int64_t nb = batch.size(), nl = left.size(), nk = contracted.size();
      Value bSize = groupSize(n, a.value, 0, nb), mSize = groupSize(n, a.value, nb, nb + nl),
            kSize = groupSize(n, a.value, nb + nl, nb + nl + nk),
            nSize = groupSize(n, b.value, nb + nk, nb + nk + right.size());
      aShape = n.make<ConcatOp>(ValueRange{bSize, mSize, kSize}, i64(0));
      bShape = n.make<ConcatOp>(ValueRange{bSize, kSize, nSize}, i64(0));
      SmallVector<Value> parts;
      if (nb + nl)
        parts.push_back(n.make<ShapeOp>(a.value, i64(0), i64(nb + nl)));
      if (!right.empty())
        parts.push_back(n.make<ShapeOp>(b.value, i64(nb + nk), i64(nb + nk + right.size())));
      outShape = parts.empty()       ? n.i64Tensor({}) // a scalar
                 : parts.size() == 1 ? parts[0]
                                     : n.make<ConcatOp>(parts, i64(0));
    }
    Value a3 = n.make<ReshapeOp>(a.value, aShape, noZero);
    Value b3 = n.make<ReshapeOp>(b.value, bShape, noZero);
    result.value = n.make<ReshapeOp>(n.make<MatMulOp>(a3, b3), outShape, noZero);
    result.labels = batch + left + right;
  }
  if (result.labels.size() != output.size())
    return n.error("Einsum output '" + output + "' does not match its operands");
  out.push_back(permute(n, result, output));
  return success();
}

} // namespace

/// Det of [..., n, n] by the Leibniz formula: the signed sum over the n!
/// permutations p of prod_i a[i, p(i)], each product one Gather of n
/// elements and a ReduceProd. Exact up to rounding and branch-free, which
/// suits the small matrices (2x2 to 4x4: transforms, Jacobians) that models
/// take determinants of; larger ones (up to 64x64) go to kiln.det.
LogicalResult det(NodeImporter &n, SmallVectorImpl<Value> &out) {
  Value x = n.required(0);
  auto t = NodeImporter::rankedType(x);
  if (!t || !t.hasStaticShape() || t.getRank() < 2)
    return n.error("Det needs an input [..., n, n] of static shape");
  int64_t rank = t.getRank(), size = t.getDimSize(rank - 1);
  if (t.getDimSize(rank - 2) != size)
    return n.error("Det needs square matrices, got " + Twine(t.getDimSize(rank - 2)) + "x" +
                   Twine(size));
  if (size < 1 || size > 64)
    return n.error("Det of " + Twine(size) + "x" + Twine(size) +
                   " matrices is not supported (Kiln handles 1x1 to 64x64)");
  if (size > 4) {
    // Too many permutations: a pivoted LU in the kiln_det_f32 kernel (in
    // double; the input goes through f32).
    Type elt = t.getElementType();
    Value input = elt.isF32() ? x : n.make<CastOp>(x, TypeAttr::get(n.b.getF32Type()));
    Value d = n.make<DetOp>(input);
    out.push_back(elt.isF32() ? d : n.make<CastOp>(d, TypeAttr::get(elt)));
    return failure(n.failed());
  }
  SmallVector<int64_t> flatShape(t.getShape().drop_back(2));
  flatShape.push_back(size * size);
  Value flat = n.make<ReshapeOp>(x, n.i64Tensor(flatShape), n.b.getBoolAttr(false));
  SmallVector<int64_t> perm(size);
  std::iota(perm.begin(), perm.end(), 0);
  Value sum;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < size; ++i)
      for (int64_t j = i + 1; j < size; ++j)
        inversions += perm[i] > perm[j];
    SmallVector<int64_t> idx;
    for (int64_t i = 0; i < size; ++i)
      idx.push_back(i * size + perm[i]);
    Value picked = n.make<GatherOp>(flat, n.i64Tensor(idx), n.b.getI64IntegerAttr(rank - 2));
    Value term = n.make<ReduceProdOp>(picked, n.b.getDenseI64ArrayAttr({rank - 2}),
                                      n.b.getBoolAttr(false));
    bool negative = inversions % 2;
    if (!sum)
      sum = negative ? n.make<NegOp>(term) : term;
    else
      sum = negative ? n.make<SubOp>(sum, term) : n.make<AddOp>(sum, term);
  } while (std::next_permutation(perm.begin(), perm.end()));
  out.push_back(sum);
  return failure(n.failed());
}

void addEinsumRules(std::vector<ImportRule> &r) {
  r.push_back({"Einsum", 12, kMaxSupportedOpset, einsum});
  r.push_back({"Det", 11, kMaxSupportedOpset, det});
}

} // namespace kiln
