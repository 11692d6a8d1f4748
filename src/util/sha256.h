#pragma once
// SHA-256 (FIPS 180-4): the checksum of extracted shards and the fingerprint of prompt sets and targets, in the
// form `sha256sum` prints, so that a user can check one by hand.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace eaglet {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // finishes: 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(std::string_view bytes);
// Of a file's bytes, read in pieces; throws eaglet::Error naming the file when it cannot be read.
std::string sha256_file(const std::string& path);
// Of token-id lists written one per line, ids separated by spaces ("1 2 3\n4 5\n"): names a prompt set.
std::string sha256_token_lists(const std::vector<std::vector<int32_t>>& lists);

}  // namespace eaglet
