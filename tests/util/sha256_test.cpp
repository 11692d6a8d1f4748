// SHA-256 against the FIPS 180-4 examples and `sha256sum` on a file that spans many blocks.
#include "util/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "test_env.h"
#include "util/error.h"

namespace eaglet {
namespace {

TEST(Sha256Test, MatchesTheStandardsExamples) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, PiecesHashAsTheWhole) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>('a' + (i * 7919) % 26);
  Sha256 s;
  for (size_t i = 0; i < text.size(); i += 63) s.update(std::string_view(text).substr(i, 63));
  EXPECT_EQ(s.hex(), sha256_hex(text));
}

TEST(Sha256Test, TokenListsAreHashedAsLines) {
  EXPECT_EQ(sha256_token_lists({{1, 2, 3}, {40}}), sha256_hex("1 2 3\n40\n"));
  EXPECT_NE(sha256_token_lists({{1, 2}, {3}}), sha256_token_lists({{1}, {2, 3}}));
}

TEST(Sha256Test, FileEqualsSha256sum) {
  const std::string path = test::temp_dir("sha256") + "/data.bin";
  std::string bytes;
  for (int i = 0; i < 3'000'000; ++i) bytes += static_cast<char>((i * 2654435761u) >> 24);
  test::write_file(path, bytes);
  const auto r = test::run_command("sha256sum " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sha256_file(path), r.out.substr(0, 64));
  EXPECT_EQ(sha256_file(path), sha256_hex(bytes));
  EXPECT_THROW(sha256_file(path + ".absent"), Error);
}

}  // namespace
}  // namespace eaglet
