#include "util/lazy_array.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "util/error.h"

namespace eaglet {
namespace {

// Bytes of [p, p + bytes) that are in memory now (mincore), in whole pages.
size_t resident_bytes(const void* p, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<void*>(p), bytes, in.data()), 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n * page;
}

TEST(LazyArray, ZeroedAndCommittedOnlyWhereWritten) {
  constexpr size_t kFloats = size_t{64} << 20;  // 256 MB reserved
  LazyArray<float> a(kFloats);
  ASSERT_EQ(a.size(), kFloats);
  EXPECT_EQ(resident_bytes(a.data(), kFloats * 4), 0u) << "making it wrote nothing";
  a[kFloats / 2] = 1.5f;
  a[kFloats - 1] = 2.5f;
  // Two pages, or two huge pages where transparent huge pages are always on: far below the reservation.
  EXPECT_LE(resident_bytes(a.data(), kFloats * 4), size_t{4} << 20);
  EXPECT_EQ(a[0], 0.0f);
  EXPECT_EQ(a[kFloats / 2], 1.5f);
  EXPECT_EQ(a[kFloats - 1], 2.5f);
}

TEST(LazyArray, MovesAndCopies) {
  LazyArray<int> a(1000);
  a[7] = 42;
  LazyArray<int> b = a;  // a copy
  b[7] = 43;
  EXPECT_EQ(a[7], 42);
  LazyArray<int> c = std::move(a);
  EXPECT_EQ(c[7], 42);
  EXPECT_EQ(c.size(), 1000u);
  c = b;
  EXPECT_EQ(c[7], 43);
  LazyArray<int> empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
}

TEST(LazyArray, AnImpossibleReservationIsAnErrorNamingItsSize) {
  try {
    LazyBytes too_big(size_t{1} << 62);
    FAIL() << "reserved 2^62 bytes";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("GB of address space"));
  }
}

}  // namespace
}  // namespace eaglet
