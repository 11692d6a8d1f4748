#pragma once
#include <cstdint>

namespace eaglet {

// Bytes the system can give without swapping (/proc/meminfo's MemAvailable; where missing, free physical pages).
int64_t available_memory_bytes();

}  // namespace eaglet
