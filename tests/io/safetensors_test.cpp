// safetensors: round trip, sharded index, strict accounting, and every kind of corrupt file.
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <span>

#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

using test::read_file;
using test::temp_dir;
using test::write_file;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string make_file(const std::string& dir, const std::string& name = "model.safetensors") {
  static const float a[6] = {1, 2, 3, 4, 5, 6};
  static const uint16_t b[4] = {0x3f80, 0x4000, 0x4040, 0x4080};  // bf16 1, 2, 3, 4
  static const int64_t c[2] = {7, -8};
  const std::string path = dir + "/" + name;
  write_safetensors(path, {{"a", DType::F32, {2, 3}, a}, {"b", DType::BF16, {4}, b}, {"c", DType::I64, {2}, c}},
                    {{"format", "pt"}});
  return path;
}

// Rewrites the JSON header of a file (keeping the data) to test header validation.
void replace_header(const std::string& path, const std::string& header) {
  const std::string bytes = read_file(path);
  uint64_t old_len = 0;
  std::memcpy(&old_len, bytes.data(), 8);
  const std::string data = bytes.substr(8 + old_len);
  std::string out(8, '\0');
  const uint64_t len = header.size();
  std::memcpy(out.data(), &len, 8);
  write_file(path, out + header + data);
}

using test::error_of;

// The in-memory entry point (used by the fuzz target) runs the same checks on the same bytes, and owns its copy.
TEST(Safetensors, FromBytesReadsWhatOpenReads) {
  const auto path = make_file(temp_dir("st_from_bytes"));
  std::string bytes = read_file(path);
  auto file = SafetensorsFile::from_bytes("image", std::as_bytes(std::span(bytes.data(), bytes.size())));
  bytes.assign(bytes.size(), '\0');
  ASSERT_EQ(file->tensors().size(), 3u);
  int64_t c1;
  std::memcpy(&c1, file->tensors().at("c").data + 8, 8);
  EXPECT_EQ(c1, -8);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_THAT(error_of([&] { SafetensorsFile::from_bytes("image", std::as_bytes(std::span(bytes.data(), 4))); }),
              AllOf(HasSubstr("image: file of 4 bytes"), HasSubstr("too short")));
}

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  const auto path = make_file(temp_dir("st_roundtrip"));
  auto file = SafetensorsFile::open(path);
  ASSERT_EQ(file->tensors().size(), 3u);
  const TensorView& a = file->tensors().at("a");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  float a5;
  std::memcpy(&a5, a.data + 5 * 4, 4);
  EXPECT_EQ(a5, 6.0f);
  const TensorView& b = file->tensors().at("b");
  uint16_t b3;
  std::memcpy(&b3, b.data + 6, 2);
  EXPECT_EQ(bf16_to_f32(b3), 4.0f);
  EXPECT_EQ(file->metadata().at("format"), "pt");
}

TEST(Safetensors, OpensShardedCheckpointThroughIndex) {
  const auto dir = temp_dir("st_sharded");
  static const float x[2] = {1, 2}, y[3] = {3, 4, 5};
  write_safetensors(dir + "/part-1.safetensors", {{"x", DType::F32, {2}, x}});
  write_safetensors(dir + "/part-2.safetensors", {{"y", DType::F32, {3}, y}});
  write_file(
      dir + "/model.safetensors.index.json",
      R"({"metadata": {"total_size": 20}, "weight_map": {"x": "part-1.safetensors", "y": "part-2.safetensors"}})");
  Checkpoint c = Checkpoint::open_dir(dir);
  ASSERT_NE(c.find("x"), nullptr);
  ASSERT_NE(c.find("y"), nullptr);
  EXPECT_EQ(c.find("y")->numel(), 3);
  EXPECT_EQ(c.all().size(), 2u);
}

TEST(BadInputSafetensors, IndexPointingAtWrongShard) {
  const auto dir = temp_dir("st_bad_index");
  static const float x[2] = {1, 2};
  write_safetensors(dir + "/part-1.safetensors", {{"x", DType::F32, {2}, x}});
  write_file(dir + "/model.safetensors.index.json",
             R"({"weight_map": {"x": "part-1.safetensors", "z": "part-1.safetensors"}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open_dir(dir); }),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("'z'"), HasSubstr("part-1.safetensors")));
  write_file(dir + "/model.safetensors.index.json", R"({"weight_map": {}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open_dir(dir); }), HasSubstr("non-empty"));
  std::filesystem::remove(dir + "/model.safetensors.index.json");
  write_safetensors(dir + "/part-2.safetensors", {{"x", DType::F32, {2}, x}});
  EXPECT_THAT(error_of([&] { Checkpoint::open_dir(dir); }), HasSubstr("no model.safetensors"));
  write_file(dir + "/model.safetensors.index.json", R"({"weight_map": {"x": "../part-1.safetensors"}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open_dir(dir); }), HasSubstr("inside the folder"));
  write_file(dir + "/model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_THAT(error_of([&] { Checkpoint::open_dir(dir); }), HasSubstr("'weight_map'"));
}

TEST(BadInputSafetensors, TruncatedFiles) {
  const auto dir = temp_dir("st_truncated");
  const auto path = make_file(dir);
  const std::string bytes = read_file(path);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{8}, size_t{20}, bytes.size() - 1}) {
    write_file(path, bytes.substr(0, keep));
    const std::string msg = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_THAT(msg, HasSubstr(path)) << "kept " << keep << " bytes";
    EXPECT_THAT(msg, testing::AnyOf(HasSubstr("too short"), HasSubstr("exceeds the file size"),
                                    HasSubstr("outside the data buffer"), HasSubstr("not valid JSON")))
        << msg;
  }
}

TEST(BadInputSafetensors, HeaderLies) {
  const auto dir = temp_dir("st_lies");
  struct Case {
    std::string header, expect;
  };
  const Case cases[] = {
      {R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 4000]}})", "outside the data buffer"},
      {R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 4]}})", "outside the data buffer"},
      {R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", "needs 24 bytes"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       "overlap"},
      {R"({"a": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 8]}})", "unsupported dtype 'Q4_K'"},
      {R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", "non-negative"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", "data_offsets"},
      {R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", "'dtype'"},
      {R"({"a": [1, 2]})", "must be an object"},
      {R"([1, 2, 3])", "JSON object"},
      {R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})", "too large"},
      // 2^61 I64 elements are 2^64 bytes: the byte size would wrap around to 0 and match empty offsets.
      {R"({"a": {"dtype": "I64", "shape": [2305843009213693952], "data_offsets": [0, 0]}})", "too large"},
      {R"({"__metadata__": {"k": 3}})", "__metadata__"},
      {"{not json", "not valid JSON"},
  };
  for (const auto& c : cases) {
    const auto path = make_file(dir);
    replace_header(path, c.header);
    const std::string msg = error_of([&] { SafetensorsFile::open(path); });
    EXPECT_THAT(msg, AllOf(HasSubstr(path), HasSubstr(c.expect))) << c.header;
  }
}

// What the reference reader refuses: duplicate names (a JSON parser keeps the last), bytes the tensors do not cover
// (trailing, or in a gap), and a header length that stops inside its own padding (every tensor would shift).
TEST(BadInputSafetensors, DuplicatesGapsAndShiftedData) {
  const auto dir = temp_dir("st_exact");
  auto path = make_file(dir);
  replace_header(
      path,
      R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [24, 32]}})");
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(path); }), AllOf(HasSubstr(path), HasSubstr("'a' appears twice")));
  path = make_file(dir);
  replace_header(path, R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})");  // 24 of 48 bytes
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(path); }), AllOf(HasSubstr("cover 24 bytes"), HasSubstr("48-byte")));
  path = make_file(dir);
  replace_header(
      path,
      R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [8, 32]}, "c": {"dtype": "I64", "shape": [2], "data_offsets": [32, 48]}})");
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(path); }), HasSubstr("starts at byte 8"));
  // The header length shortened by 8: still valid JSON (padding), but the data would start 8 bytes early.
  path = make_file(dir);
  std::string bytes = read_file(path);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  const std::string padded = bytes.substr(8, len) + std::string(8, ' ');
  std::string out(8, '\0');
  const uint64_t new_len = padded.size();
  std::memcpy(out.data(), &new_len, 8);
  write_file(path, out + padded + bytes.substr(8 + len));
  ASSERT_NO_THROW(SafetensorsFile::open(path));  // padding counted in the length is fine
  std::memcpy(out.data(), &len, 8);              // the length stops inside the padding
  write_file(path, out + padded + bytes.substr(8 + len));
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(path); }), HasSubstr("cover"));
  // A NUL byte in the padding: the JSON parser would stop reading there; the reference reader refuses the header.
  std::string with_nul = padded;
  with_nul[len] = '\0';
  std::memcpy(out.data(), &new_len, 8);
  write_file(path, out + with_nul + bytes.substr(8 + len));
  EXPECT_THAT(
      error_of([&] { SafetensorsFile::open(path); }),
      AllOf(HasSubstr(path + ": header: not valid JSON"), HasSubstr("NUL byte at offset " + std::to_string(len))));
}

TEST(BadInputSafetensors, StrictAccountingNamesEveryProblem) {
  const auto dir = temp_dir("st_accounting");
  make_file(dir);
  Checkpoint ckpt = Checkpoint::open_dir(dir);
  {
    TensorConsumer take(ckpt, "test model");
    EXPECT_NE(take.take("a", {2, 3}), nullptr);
    EXPECT_EQ(take.take("missing.weight", {4}), nullptr);
    EXPECT_EQ(take.take("b", {2, 2}), nullptr);  // wrong shape
    const std::string msg = error_of([&] { take.finish(); });
    EXPECT_THAT(msg, AllOf(HasSubstr("model.safetensors"), HasSubstr("missing.weight"),
                           HasSubstr("'b' has shape [4], expected [2, 2]"), HasSubstr("does not use: c")));
  }
  {
    TensorConsumer take(ckpt, "test model");
    take.take("a", {2, 3});
    take.take("b", {4});
    take.declare_unused("c", "test");
    EXPECT_NO_THROW(take.finish());
  }
  {
    TensorConsumer take(ckpt, "test model");
    take.take("a", {2, 3});
    take.allow_unexpected(true);  // the explicit opt-out: unexpected tensors tolerated, missing ones still fatal
    EXPECT_NO_THROW(take.finish());
    TensorConsumer strict(ckpt, "test model");
    strict.take("a", {2, 3});
    strict.take("zzz", {1});
    strict.allow_unexpected(true);
    EXPECT_THAT(error_of([&] { strict.finish(); }), HasSubstr("zzz"));
  }
  {
    TensorConsumer take(ckpt, "test model");
    take.take("a", {2, 3});
    take.take("b", {4});
    take.take("c", {2});  // I64 where a float weight is expected
    EXPECT_THAT(error_of([&] { take.finish(); }), HasSubstr("'c' has dtype I64"));
  }
}

TEST(BadInputSafetensors, NotAFileOrFolder) {
  EXPECT_THAT(error_of([] { SafetensorsFile::open("/nonexistent/x.safetensors"); }), HasSubstr("cannot open"));
  EXPECT_THAT(error_of([] { Checkpoint::open_dir("/nonexistent"); }),
              HasSubstr("/nonexistent: no such file or directory"));
  const auto dir = temp_dir("st_dir_as_file");
  std::filesystem::create_directories(dir + "/model.safetensors");
  EXPECT_THAT(error_of([&] { Checkpoint::open_dir(dir); }), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace eaglet
