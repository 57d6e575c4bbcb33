// Mutation test: rewrites real models in the ways broken exporters and
// corrupted files do (attributes out of range or of the wrong type,
// initializers whose payload does not match their dims, overflowing dims,
// cycles, dangling names, duplicate names, unknown names in subgraphs,
// negative or enormous trip counts, opsets from the future, flipped bytes),
// and compiles and runs each variant in a forked child. A variant may fail
// to load or run, with a message; it must never crash, hang, or fail
// silently.
//
//   kiln-mutate [--seed N] [--variants N] [--timeout S] [--verbose]
//               [--save-failures DIR] [--models-under DIR]... MODEL.onnx...
//
// Exit status 1 when any variant crashed, hung or failed without a message.
#include "kiln/Kiln.h"

#include "onnx/onnx_pb.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using Rng = std::mt19937_64;

struct Options {
  uint64_t seed = 1;
  int variants = 60;
  int timeoutSeconds = 60;
  bool verbose = false;
  std::string saveDir; // where failing variants are written, if set
  std::vector<std::string> models;
};

int64_t pick(Rng &rng, int64_t n) { return n <= 0 ? 0 : (int64_t)(rng() % (uint64_t)n); }

/// All nodes of the graph and its subgraphs.
void collectNodes(onnx::GraphProto *g, std::vector<onnx::NodeProto *> &out) {
  for (auto &node : *g->mutable_node()) {
    out.push_back(&node);
    for (auto &a : *node.mutable_attribute())
      if (a.has_g())
        collectNodes(a.mutable_g(), out);
  }
}

/// One mutation; returns its description, or "" when it does not apply to
/// this model (another is drawn).
using Mutation = std::function<std::string(onnx::ModelProto &, Rng &)>;

std::vector<std::pair<const char *, Mutation>> mutations() {
  auto nodesOf = [](onnx::ModelProto &m) {
    std::vector<onnx::NodeProto *> nodes;
    collectNodes(m.mutable_graph(), nodes);
    return nodes;
  };
  return {
      {"attribute out of range",
       [=](onnx::ModelProto &m, Rng &rng) -> std::string {
         std::vector<onnx::AttributeProto *> attrs;
         for (auto *n : nodesOf(m))
           for (auto &a : *n->mutable_attribute())
             if (a.type() == onnx::AttributeProto::INT || a.type() == onnx::AttributeProto::INTS)
               attrs.push_back(&a);
         if (attrs.empty())
           return "";
         auto *a = attrs[pick(rng, attrs.size())];
         const int64_t values[] = {-1000, 1000, -1, 0, INT64_MAX, INT64_MIN, 1LL << 40};
         int64_t v = values[pick(rng, 7)];
         if (a->type() == onnx::AttributeProto::INT) {
           a->set_i(v);
         } else if (a->ints_size() > 0 && pick(rng, 2)) {
           a->set_ints(pick(rng, a->ints_size()), v);
         } else {
           a->add_ints(v); // lengths that no longer match the rank
         }
         return "attribute '" + a->name() + "' = " + std::to_string(v);
       }},
      {"attribute of the wrong type",
       [=](onnx::ModelProto &m, Rng &rng) -> std::string {
         std::vector<onnx::AttributeProto *> attrs;
         for (auto *n : nodesOf(m))
           for (auto &a : *n->mutable_attribute())
             attrs.push_back(&a);
         if (attrs.empty())
           return "";
         auto *a = attrs[pick(rng, attrs.size())];
         const onnx::AttributeProto::AttributeType types[] = {
             onnx::AttributeProto::FLOAT, onnx::AttributeProto::INT,
             onnx::AttributeProto::STRING, onnx::AttributeProto::INTS,
             onnx::AttributeProto::TENSOR, onnx::AttributeProto::GRAPH};
         auto t = types[pick(rng, 6)];
         onnx::AttributeProto fresh;
         fresh.set_name(a->name());
         fresh.set_type(t);
         if (t == onnx::AttributeProto::FLOAT)
           fresh.set_f(2.5f);
         else if (t == onnx::AttributeProto::STRING)
           fresh.set_s("bogus");
         *a = fresh;
         return "attribute '" + a->name() + "' retyped to " + std::to_string((int)t);
       }},
      {"initializer payload does not match its dims",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto *g = m.mutable_graph();
         if (g->initializer_size() == 0)
           return "";
         auto *t = g->mutable_initializer(pick(rng, g->initializer_size()));
         if (!t->raw_data().empty() && pick(rng, 2)) {
           t->mutable_raw_data()->resize(t->raw_data().size() / 2);
           return "initializer '" + t->name() + "' raw data halved";
         }
         if (t->dims_size() == 0)
           t->add_dims(3);
         else
           t->set_dims(0, t->dims(0) + 3);
         return "initializer '" + t->name() + "' dims grown";
       }},
      {"dims whose product overflows",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto *g = m.mutable_graph();
         if (g->initializer_size() > 0 && pick(rng, 2)) {
           auto *t = g->mutable_initializer(pick(rng, g->initializer_size()));
           t->clear_dims();
           t->add_dims(1LL << 40);
           t->add_dims(1LL << 40);
           return "initializer '" + t->name() + "' dims 2^40 x 2^40";
         }
         if (g->input_size() == 0)
           return "";
         auto *shape = g->mutable_input(pick(rng, g->input_size()))
                           ->mutable_type()->mutable_tensor_type()->mutable_shape();
         shape->add_dim()->set_dim_value(1LL << 62);
         shape->add_dim()->set_dim_value(1LL << 62);
         return "graph input with dims 2^62 x 2^62";
       }},
      {"a cycle",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto *g = m.mutable_graph();
         if (g->node_size() < 1)
           return "";
         int64_t i = pick(rng, g->node_size()), j = i + pick(rng, g->node_size() - i);
         auto *n = g->mutable_node(i);
         if (n->input_size() == 0 || g->node(j).output_size() == 0)
           return "";
         n->set_input(0, g->node(j).output(0));
         return "node " + std::to_string(i) + " reads node " + std::to_string(j) + "'s output";
       }},
      {"a name nothing produces",
       [=](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto nodes = nodesOf(m);
         if (nodes.empty())
           return "";
         auto *n = nodes[pick(rng, nodes.size())];
         if (n->input_size() == 0)
           return "";
         n->set_input(pick(rng, n->input_size()), "no_such_value");
         return "node '" + n->name() + "' reads no_such_value";
       }},
      {"duplicate value names",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto *g = m.mutable_graph();
         if (g->node_size() < 2)
           return "";
         int64_t i = pick(rng, g->node_size()), j = pick(rng, g->node_size());
         if (i == j || g->node(i).output_size() == 0 || g->node(j).output_size() == 0)
           return "";
         g->mutable_node(i)->set_output(0, g->node(j).output(0));
         return "nodes " + std::to_string(i) + " and " + std::to_string(j) + " write one name";
       }},
      {"a subgraph naming an unknown value",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         std::vector<onnx::GraphProto *> subs;
         for (auto &n : *m.mutable_graph()->mutable_node())
           for (auto &a : *n.mutable_attribute())
             if (a.has_g())
               subs.push_back(a.mutable_g());
         if (subs.empty())
           return "";
         auto *g = subs[pick(rng, subs.size())];
         std::vector<onnx::NodeProto *> readers;
         for (auto &n : *g->mutable_node())
           if (n.input_size() > 0)
             readers.push_back(&n);
         if (readers.empty() || pick(rng, 4) == 0) {
           if (g->output_size() == 0)
             return "";
           g->mutable_output(0)->set_name("nowhere");
           return "subgraph output renamed to nowhere";
         }
         readers[pick(rng, readers.size())]->set_input(0, "nowhere");
         return "subgraph node reads nowhere";
       }},
      {"a negative or enormous trip count",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto *g = m.mutable_graph();
         for (auto &n : *g->mutable_node()) {
           if (n.op_type() != "Loop" || n.input_size() == 0)
             continue;
           auto *t = g->add_initializer();
           t->set_name("mutated_trip_count");
           t->set_data_type(onnx::TensorProto::INT64);
           int64_t v = pick(rng, 2) ? -5 : (1LL << 60);
           t->add_int64_data(v);
           n.set_input(0, "mutated_trip_count");
           return "trip count " + std::to_string(v);
         }
         return "";
       }},
      {"an opset from the future",
       [](onnx::ModelProto &m, Rng &) -> std::string {
         for (auto &o : *m.mutable_opset_import())
           if (o.domain().empty() || o.domain() == "ai.onnx")
             o.set_version(99);
         return "opset 99";
       }},
      {"a missing input",
       [=](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto nodes = nodesOf(m);
         if (nodes.empty())
           return "";
         auto *n = nodes[pick(rng, nodes.size())];
         if (n->input_size() == 0)
           return "";
         n->mutable_input()->RemoveLast();
         return "node '" + n->name() + "' (" + n->op_type() + ") lost its last input";
       }},
      {"another operator in a node's place",
       [=](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto nodes = nodesOf(m);
         if (nodes.size() < 2)
           return "";
         auto *a = nodes[pick(rng, nodes.size())], *b = nodes[pick(rng, nodes.size())];
         std::string was = a->op_type();
         a->set_op_type(b->op_type());
         return "node '" + a->name() + "' " + was + " -> " + b->op_type();
       }},
      {"an unsupported element type",
       [](onnx::ModelProto &m, Rng &rng) -> std::string {
         auto *g = m.mutable_graph();
         if (g->input_size() == 0)
           return "";
         const int types[] = {0, 8, 14, 15, 17, 99};
         int t = types[pick(rng, 6)];
         g->mutable_input(pick(rng, g->input_size()))
             ->mutable_type()->mutable_tensor_type()->set_elem_type(t);
         return "graph input elem_type " + std::to_string(t);
       }},
  };
}

/// Flips a few bytes of the serialized model.
std::string flipBytes(std::string bytes, Rng &rng, std::string &what) {
  int flips = 1 + (int)pick(rng, 8);
  for (int i = 0; i < flips && !bytes.empty(); ++i)
    bytes[pick(rng, bytes.size())] ^= (char)(1 + pick(rng, 255));
  what = std::to_string(flips) + " flipped bytes";
  return bytes;
}

/// Loads and runs one variant (in the child). Exit 0: ran or failed with a
/// message; 3: failed without one.
[[noreturn]] void runVariant(const std::string &bytes) {
  std::string err;
  kiln::CompileOptions opts;
  opts.optLevel = 0;
  auto model = kiln::Model::loadFromMemory(bytes.data(), bytes.size(), "", opts, &err);
  if (!model)
    _exit(err.empty() ? 3 : 0);
  std::vector<kiln::Tensor> inputs;
  std::vector<const kiln_tensor *> raw;
  for (const kiln::TensorInfo &info : model->inputs()) {
    std::vector<int64_t> dims;
    int64_t count = 1;
    for (int64_t d : info.dims) {
      dims.push_back(d < 0 ? 1 : d);
      count *= dims.back();
    }
    if (count > (1 << 24))
      _exit(0); // a declared input too large to allocate here; not the model's fault
    inputs.emplace_back(info.dtype, dims);
    if (inputs.back().get())
      std::memset(inputs.back().data(), 0, kiln_tensor_num_bytes(inputs.back().get()));
    raw.push_back(inputs.back().get());
  }
  std::vector<kiln::Tensor> outputs;
  kiln::Status s = model->run(raw, outputs);
  _exit(!s.ok() && s.message.empty() ? 3 : 0);
}

} // namespace

int main(int argc, char **argv) {
  Options opts;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--seed")
      opts.seed = std::stoull(next());
    else if (a == "--variants")
      opts.variants = std::stoi(next());
    else if (a == "--timeout")
      opts.timeoutSeconds = std::stoi(next());
    else if (a == "--verbose")
      opts.verbose = true;
    else if (a == "--save-failures")
      opts.saveDir = next();
    else if (a == "--models-under") {
      // Every model.onnx below DIR, in a stable order.
      std::vector<std::string> found;
      std::error_code ec;
      for (auto it = std::filesystem::recursive_directory_iterator(next(), ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        if (it->path().filename() == "model.onnx")
          found.push_back(it->path().string());
      std::sort(found.begin(), found.end());
      opts.models.insert(opts.models.end(), found.begin(), found.end());
    }
    else if (a == "--help" || a[0] == '-') {
      std::fprintf(a == "--help" ? stdout : stderr,
                   "usage: kiln-mutate [--seed N] [--variants N] [--timeout S] [--verbose]\n"
                   "                   [--save-failures DIR] [--models-under DIR]... MODEL.onnx...\n");
      return a == "--help" ? 0 : 2;
    } else
      opts.models.push_back(a);
  }
  if (opts.models.empty()) {
    std::fprintf(stderr, "kiln-mutate: no models given\n");
    return 2;
  }
  auto table = mutations();
  Rng rng(opts.seed);
  int total = 0, bad = 0;
  for (const std::string &path : opts.models) {
    std::ifstream f(path, std::ios::binary);
    std::string original((std::istreambuf_iterator<char>(f)), {});
    onnx::ModelProto base;
    if (original.empty() || !base.ParseFromString(original)) {
      std::fprintf(stderr, "kiln-mutate: cannot read %s\n", path.c_str());
      return 2;
    }
    for (int v = 0; v < opts.variants; ++v) {
      std::string what, bytes;
      if (v % 8 == 7) {
        bytes = flipBytes(original, rng, what);
      } else {
        for (int tries = 0; tries < 50 && what.empty(); ++tries) {
          onnx::ModelProto m = base;
          auto &[kind, mutate] = table[pick(rng, table.size())];
          std::string detail = mutate(m, rng);
          if (!detail.empty()) {
            what = std::string(kind) + ": " + detail;
            m.SerializeToString(&bytes);
          }
        }
        if (what.empty())
          continue;
      }
      ++total;
      std::fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        alarm(opts.timeoutSeconds);
        runVariant(bytes);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      std::string verdict;
      if (WIFSIGNALED(status))
        verdict = WTERMSIG(status) == SIGALRM ? "HANG" : std::string("CRASH (") +
                                                             strsignal(WTERMSIG(status)) + ")";
      else if (WEXITSTATUS(status) == 3)
        verdict = "SILENT FAILURE (no message)";
      else if (WEXITSTATUS(status) != 0)
        verdict = "EXIT " + std::to_string(WEXITSTATUS(status));
      if (!verdict.empty()) {
        ++bad;
        std::printf("%s %s #%d: %s\n", verdict.c_str(), path.c_str(), v, what.c_str());
        if (!opts.saveDir.empty()) {
          std::string out = opts.saveDir + "/variant_" + std::to_string(total) + ".onnx";
          std::ofstream(out, std::ios::binary) << bytes;
          std::printf("  saved as %s\n", out.c_str());
        }
      } else if (opts.verbose) {
        std::printf("ok %s #%d: %s\n", path.c_str(), v, what.c_str());
      }
    }
  }
  std::printf("kiln-mutate: %d variants (seed %llu), %d crashed, hung or failed silently\n",
              total, (unsigned long long)opts.seed, bad);
  return bad ? 1 : 0;
}
