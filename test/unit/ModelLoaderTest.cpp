// Loading models: bad bytes and external-data containment.
#include "kiln/Frontend/ModelLoader.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace {

class LoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    root = fs::temp_directory_path() /
           ("kiln-loader-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root / "model");
    std::ofstream(root / "model" / "w.bin", std::ios::binary) << std::string("\0\0\x80\x3f\0\0\0\x40", 8);
    std::ofstream(root / "secret.bin", std::ios::binary) << "topsecret";
  }
  void TearDown() override { fs::remove_all(root); }

  /// y = x + w, with w stored externally at `location`.
  std::string writeModel(const std::string &location, int64_t offset = 0, int64_t length = -1) {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.add_opset_import()->set_version(13);
    auto *g = m.mutable_graph();
    g->set_name("g");
    auto *n = g->add_node();
    n->set_op_type("Add");
    n->add_input("x");
    n->add_input("w");
    n->add_output("y");
    auto *w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(2);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const std::string &k, const std::string &v) {
      auto *e = w->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", location);
    if (offset)
      kv("offset", std::to_string(offset));
    if (length >= 0)
      kv("length", std::to_string(length));
    for (const char *name : {"x", "y"}) {
      auto *vi = (std::string(name) == "x" ? g->add_input() : g->add_output());
      vi->set_name(name);
      auto *tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      tt->mutable_shape()->add_dim()->set_dim_value(2);
    }
    std::string path = (root / "model" / "model.onnx").string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }

  fs::path root;
};

TEST_F(LoaderTest, ReadsExternalData) {
  kiln::LoadedModel m;
  std::string err;
  ASSERT_TRUE(kiln::loadModelFromFile(writeModel("w.bin"), m, err)) << err;
  const auto &w = m.proto->graph().initializer(0);
  ASSERT_EQ(w.raw_data().size(), 8u);
  float v[2];
  std::memcpy(v, w.raw_data().data(), 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
}

TEST_F(LoaderTest, RejectsAbsolutePaths) {
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel((root / "secret.bin").string()), m, err));
  EXPECT_NE(err.find("is an absolute path"), std::string::npos) << err;
}

TEST_F(LoaderTest, RejectsDotDotEscape) {
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("sub/../../secret.bin"), m, err));
  EXPECT_NE(err.find("escapes the model's folder"), std::string::npos) << err;
}

TEST_F(LoaderTest, RejectsSymlinkOut) {
  fs::create_symlink(root / "secret.bin", root / "model" / "link.bin");
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("link.bin"), m, err));
  EXPECT_NE(err.find("link that leads outside"), std::string::npos) << err;
}

TEST_F(LoaderTest, RejectsOutOfRangeOffsetAndLength) {
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("w.bin", 100), m, err));
  EXPECT_NE(err.find("offset 100 lies outside the file"), std::string::npos) << err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("w.bin", 4, 8), m, err));
  EXPECT_NE(err.find("runs past the end"), std::string::npos) << err;
}

TEST_F(LoaderTest, BufferWithoutBaseDirCannotUseExternalData) {
  std::ifstream in(writeModel("w.bin"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromBuffer(bytes.data(), bytes.size(), "", m, err));
  EXPECT_NE(err.find("without a base folder"), std::string::npos) << err;
  EXPECT_TRUE(kiln::loadModelFromBuffer(bytes.data(), bytes.size(), (root / "model").string(), m, err))
      << err;
}

TEST_F(LoaderTest, GarbageIsNotAModel) {
  kiln::LoadedModel m;
  std::string err;
  const char junk[] = "\x0a\xff\xff\xff\x0f not protobuf";
  EXPECT_FALSE(kiln::loadModelFromBuffer(junk, sizeof junk, "", m, err));
  EXPECT_NE(err.find("not a valid ONNX model"), std::string::npos) << err;
  EXPECT_FALSE(kiln::loadModelFromFile((root / "nope.onnx").string(), m, err));
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
  EXPECT_FALSE(kiln::loadModelFromFile(root.string(), m, err));
  EXPECT_NE(err.find("is a folder"), std::string::npos) << err;
}

} // namespace

namespace {

TEST_F(LoaderTest, RejectsNulBytesAndTakesPercentLiterally) {
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel(std::string("w.bin\0../../secret.bin", 22)), m, err));
  EXPECT_NE(err.find("contains a NUL byte"), std::string::npos) << err;
  // "%2e%2e/secret.bin" is a file of that name inside the folder, not "..".
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("%2e%2e/secret.bin"), m, err));
  EXPECT_NE(err.find("cannot be opened"), std::string::npos) << err;
  fs::create_directories(root / "model" / "%2e%2e");
  std::ofstream(root / "model" / "%2e%2e" / "secret.bin", std::ios::binary)
      << std::string("\0\0\x80\x3f\0\0\0\x40", 8);
  EXPECT_TRUE(kiln::loadModelFromFile(writeModel("%2e%2e/secret.bin"), m, err)) << err;
}

TEST_F(LoaderTest, RejectsHardLinksUnlessAllowed) {
  fs::create_hard_link(root / "secret.bin", root / "model" / "hard.bin");
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("hard.bin", 0, 8), m, err));
  EXPECT_NE(err.find("has 2 hard links"), std::string::npos) << err;
  ::setenv("KILN_ALLOW_HARD_LINKS", "1", 1);
  EXPECT_TRUE(kiln::loadModelFromFile(writeModel("hard.bin", 0, 8), m, err)) << err;
  ::unsetenv("KILN_ALLOW_HARD_LINKS");
}

TEST_F(LoaderTest, RejectsOverflowingAndNegativeNumbers) {
  kiln::LoadedModel m;
  std::string err;
  // 2^63 - 1 twice: within int64 each, but past the end of an 8-byte file
  // (and their sum must not wrap around to look small).
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("w.bin", 4, INT64_MAX), m, err));
  EXPECT_NE(err.find("runs past the end"), std::string::npos) << err;
  EXPECT_FALSE(kiln::loadModelFromFile(writeModel("w.bin", INT64_MAX, 8), m, err));
  EXPECT_NE(err.find("lies outside the file"), std::string::npos) << err;
  // Text that is not one int64: too large, trailing junk, negative.
  for (const char *bad : {"18446744073709551616", "4junk", "-8"}) {
    std::string path = writeModel("w.bin");
    onnx::ModelProto p;
    {
      std::ifstream in(path, std::ios::binary);
      ASSERT_TRUE(p.ParseFromIstream(&in));
    }
    auto *e = p.mutable_graph()->mutable_initializer(0)->add_external_data();
    e->set_key("length");
    e->set_value(bad);
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      p.SerializeToOstream(&out);
    }
    EXPECT_FALSE(kiln::loadModelFromFile(path, m, err)) << bad;
    EXPECT_NE(err.find("is not a number from 0 to 2^63-1"), std::string::npos) << err;
  }
}

TEST_F(LoaderTest, RejectsOverlappingRanges) {
  // Two initializers over bytes 0..8 and 4..8 of one file.
  std::string path = writeModel("w.bin", 0, 8);
  onnx::ModelProto p;
  {
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(p.ParseFromIstream(&in));
  }
  auto *g = p.mutable_graph();
  auto *v = g->add_initializer();
  *v = g->initializer(0);
  v->set_name("v");
  v->clear_dims();
  v->add_dims(1);
  for (auto &kv : *v->mutable_external_data())
    if (kv.key() == "length")
      kv.set_value("4");
  auto *off = v->add_external_data();
  off->set_key("offset");
  off->set_value("4");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    p.SerializeToOstream(&out);
  }
  kiln::LoadedModel m;
  std::string err;
  EXPECT_FALSE(kiln::loadModelFromFile(path, m, err));
  EXPECT_NE(err.find("bytes 4..8 overlap those of tensor 'w' (0..8)"), std::string::npos) << err;
}

} // namespace
