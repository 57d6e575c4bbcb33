// The on-disk compile cache: reuse across Model instances, recovery from
// damaged entries, the key, and the size bound.
#include "CompileCache.h"
#include "kiln/Kiln.h"

#include "llvm/Support/MemoryBuffer.h"
#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

const std::string kTinyMlp = std::string(KILN_EXAMPLES_DIR) + "/tiny_mlp/model.onnx";

std::string freshDir(const std::string &name) {
  std::string dir = (fs::temp_directory_path() /
                     ("kiln-cache-test-" + std::to_string(getpid()) + "-" + name))
                        .string();
  fs::remove_all(dir);
  return dir;
}

/// The cache's entries of one kind: ".kjit" (compiled code) or ".ksig" (a
/// model's signature).
std::vector<fs::path> entries(const std::string &dir, const std::string &ext = ".kjit") {
  std::vector<fs::path> out;
  if (fs::exists(dir + "/jit"))
    for (const auto &e : fs::directory_iterator(dir + "/jit"))
      if (e.path().extension() == ext)
        out.push_back(e.path());
  return out;
}

struct Result {
  std::vector<float> y;
  kiln::Model::Stats stats;
};

/// Loads the tiny MLP (or `path`) with the cache in `dir` and runs it on
/// x = [1, 2, 3, 4].
Result runTiny(const std::string &dir, int optLevel = 3, const std::string &path = kTinyMlp) {
  kiln::CompileOptions options;
  options.cacheDir = dir;
  options.optLevel = optLevel;
  std::string err;
  auto model = kiln::Model::load(path, options, &err);
  EXPECT_TRUE(model) << err;
  if (!model)
    return {};
  kiln::Tensor x(KILN_FLOAT32, {1, 4});
  for (int i = 0; i < 4; ++i)
    x.data<float>()[i] = float(i + 1);
  std::vector<kiln::Tensor> out;
  kiln::Status s = model->run({x.get()}, out);
  EXPECT_TRUE(s.ok()) << s.message;
  if (!s.ok())
    return {};
  return {{out[0].data<float>()[0], out[0].data<float>()[1]}, model->stats()};
}

/// softmax([10, 1]), derived by hand in examples/tiny_mlp/output_0.textproto.
void expectReference(const Result &r) {
  ASSERT_EQ(r.y.size(), 2u);
  EXPECT_NEAR(r.y[0], 0.999876605, 1e-6);
  EXPECT_NEAR(r.y[1], 0.000123394576, 1e-9);
}

TEST(CompileCache, SecondLoadReusesTheCode) {
  std::string dir = freshDir("reuse");
  Result cold = runTiny(dir);
  expectReference(cold);
  EXPECT_EQ(cold.stats.compilations, 1);
  EXPECT_EQ(cold.stats.cacheHits, 0);
  ASSERT_EQ(entries(dir).size(), 1u);
  Result warm = runTiny(dir);
  expectReference(warm);
  EXPECT_EQ(warm.stats.cacheHits, 1);
  EXPECT_EQ(warm.y, cold.y) << "the cached code computes exactly what was compiled";
  // Another optimisation level is another key.
  Result o1 = runTiny(dir, 1);
  expectReference(o1);
  EXPECT_EQ(o1.stats.cacheHits, 0);
  EXPECT_EQ(entries(dir).size(), 2u);
  fs::remove_all(dir);
}

/// softmax([1, 10]): the tiny MLP with W2's columns swapped.
void expectSwapped(const Result &r) {
  ASSERT_EQ(r.y.size(), 2u);
  EXPECT_NEAR(r.y[0], 0.000123394576, 1e-9);
  EXPECT_NEAR(r.y[1], 0.999876605, 1e-6);
}

/// Writes the tiny MLP into `folder` as model.onnx; with `external`, W2
/// (as raw float32) goes to w2.bin beside it.
std::string writeTiny(const fs::path &folder, const std::vector<float> &w2, bool external) {
  onnx::ModelProto m;
  std::ifstream in(kTinyMlp, std::ios::binary);
  EXPECT_TRUE(m.ParseFromIstream(&in));
  for (auto &t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() != "W2")
      continue;
    t.clear_float_data();
    std::string raw(reinterpret_cast<const char *>(w2.data()), w2.size() * 4);
    if (external) {
      std::ofstream(folder / "w2.bin", std::ios::binary) << raw;
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      auto *kv = t.add_external_data();
      kv->set_key("location");
      kv->set_value("w2.bin");
    } else {
      t.set_raw_data(raw);
    }
  }
  std::string path = (folder / "model.onnx").string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  EXPECT_TRUE(m.SerializeToOstream(&out));
  return path;
}

TEST(CompileCache, EditedModelIsNotServedFromTheCache) {
  std::string dir = freshDir("edited");
  fs::path folder = dir + "-model";
  fs::create_directories(folder);
  const std::vector<float> w2 = {1, -1, 1, 1}, swapped = {-1, 1, 1, 1};
  std::string path = writeTiny(folder, w2, /*external=*/false);
  expectReference(runTiny(dir, 3, path));
  Result warm = runTiny(dir, 3, path);
  expectReference(warm);
  EXPECT_EQ(warm.stats.cacheHits, 1);
  // The same file, edited in place: its bytes, not its name, are the key.
  writeTiny(folder, swapped, /*external=*/false);
  Result edited = runTiny(dir, 3, path);
  expectSwapped(edited);
  EXPECT_EQ(edited.stats.cacheHits, 0);
  fs::remove_all(dir);
  fs::remove_all(folder);
}

TEST(CompileCache, EditedExternalDataIsNotServedFromTheCache) {
  std::string dir = freshDir("external");
  fs::path folder = dir + "-model";
  fs::create_directories(folder);
  std::string path = writeTiny(folder, {1, -1, 1, 1}, /*external=*/true);
  expectReference(runTiny(dir, 3, path));
  Result warm = runTiny(dir, 3, path);
  expectReference(warm);
  EXPECT_EQ(warm.stats.cacheHits, 1);
  EXPECT_EQ(entries(dir, ".ksig").size(), 1u);
  // Only the weights file changes; the model file is byte for byte the same.
  std::string before = path + ".before";
  fs::copy_file(path, before);
  writeTiny(folder, {-1, 1, 1, 1}, /*external=*/true);
  std::ifstream a(path, std::ios::binary), b(before, std::ios::binary);
  ASSERT_EQ(std::string(std::istreambuf_iterator<char>(a), {}),
            std::string(std::istreambuf_iterator<char>(b), {}));
  Result edited = runTiny(dir, 3, path);
  expectSwapped(edited);
  EXPECT_EQ(edited.stats.cacheHits, 0);
  fs::remove_all(dir);
  fs::remove_all(folder);
}

TEST(CompileCache, DataChangedAfterAWarmLoadIsNotCompiledUnderTheOldKey) {
  std::string dir = freshDir("changed-after-load");
  fs::path folder = dir + "-model";
  fs::create_directories(folder);
  std::string path = writeTiny(folder, {1, -1, 1, 1}, /*external=*/true);
  expectReference(runTiny(dir, 3, path));
  // A warm load (the signature from the cache, nothing parsed), then the
  // weights change and the compiled code is gone: the compile that follows
  // must not store the new weights' code under the old weights' key.
  kiln::CompileOptions options;
  options.cacheDir = dir;
  std::string err;
  auto model = kiln::Model::load(path, options, &err);
  ASSERT_TRUE(model) << err;
  writeTiny(folder, {-1, 1, 1, 1}, /*external=*/true);
  for (const fs::path &e : entries(dir))
    fs::remove(e);
  kiln::Status s = model->prepare(std::vector<std::vector<int64_t>>{{1, 4}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("changed on disk after it was loaded"), std::string::npos) << s.message;
  EXPECT_TRUE(entries(dir).empty());
  // Loaded afresh, the model is the edited one.
  expectSwapped(runTiny(dir, 3, path));
  fs::remove_all(dir);
  fs::remove_all(folder);
}

TEST(CompileCache, DamagedEntriesAreRecompiledNotLoaded) {
  for (const char *ext : {".kjit", ".ksig"}) {
  SCOPED_TRACE(ext);
  std::string dir = freshDir("damaged");
  expectReference(runTiny(dir));
  ASSERT_EQ(entries(dir, ext).size(), 1u);
  fs::path entry = entries(dir, ext)[0];
  std::string intact;
  {
    std::ifstream f(entry, std::ios::binary);
    intact.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::vector<std::pair<const char *, std::string>> damages = {
      {"truncated", intact.substr(0, intact.size() / 2)},
      {"empty", ""},
      {"one byte flipped", intact},
      {"a byte appended", intact + "x"}};
  damages[2].second[intact.size() / 2] ^= 0x40;
  for (const auto &[what, bytes] : damages) {
    {
      std::ofstream f(entry, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), bytes.size());
    }
    Result r = runTiny(dir);
    SCOPED_TRACE(what);
    expectReference(r);
    // A damaged signature costs a parse, not the compiled code.
    EXPECT_EQ(r.stats.cacheHits, std::string(ext) == ".kjit" ? 0 : 1);
    // The damaged entry was replaced by a good one.
    EXPECT_EQ(runTiny(dir).stats.cacheHits, 1);
    EXPECT_EQ(entries(dir, ext).size(), 1u);
  }
  fs::remove_all(dir);
  }
}

TEST(CompileCache, OffWritesNothing) {
  std::string dir = freshDir("off");
  kiln::CompileOptions options;
  options.cacheDir = dir;
  options.cache = false;
  std::string err;
  auto model = kiln::Model::load(kTinyMlp, options, &err);
  ASSERT_TRUE(model) << err;
  ASSERT_TRUE(model->prepare(std::vector<std::vector<int64_t>>{{1, 4}}).ok());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CompileCache, SizeBoundEvictsLeastRecentlyUsed) {
  std::string dir = freshDir("bound");
  kiln::CompileCache cache(dir, /*maxBytes=*/1 << 20);
  std::string payload(400 << 10, 'k');
  for (int i = 0; i < 5; ++i) {
    payload[0] = char('a' + i);
    cache.store("entry" + std::to_string(i), payload);
    // Distinct modification times, in store order, even on coarse file
    // systems: each entry is dated back, later ones less far.
    fs::last_write_time(dir + "/jit/entry" + std::to_string(i) + ".kjit",
                        fs::file_time_type::clock::now() - std::chrono::seconds(100 - i));
  }
  std::shared_ptr<llvm::MemoryBuffer> data;
  std::string_view got;
  EXPECT_FALSE(cache.load("entry0", data, got));
  EXPECT_FALSE(cache.load("entry2", data, got));
  ASSERT_TRUE(cache.load("entry4", data, got));
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_EQ(got[0], 'e');
  EXPECT_LE(entries(dir).size(), 2u);
  fs::remove_all(dir);
}

} // namespace
