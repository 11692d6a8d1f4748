#pragma once
// `eaglet train-draft --nproc N`: N local processes of this program, ranks 0..N-1 of one data-parallel run meeting
// on a free loopback port (torchrun's --standalone, in small). The first to fail ends the others.
#include <string>
#include <vector>

namespace eaglet::cli {

// Runs this program again N times with `args` (argv without argv[0] and --nproc) plus --dist-url, --world-size,
// --rank and, when `threads` is 0, --threads cores/N; returns the exit status to end with.
int launch_local_processes(const std::vector<std::string>& args, int nproc, int threads);

}  // namespace eaglet::cli
