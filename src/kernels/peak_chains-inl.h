// The loop of the compute-peak probe (kernels/peak.h), shared by its per-ISA translation units (each includes this
// after selecting its target ISA): `C` accumulator chains, chain i starting from init(i) (identical chains would be
// merged by the compiler into one), each advanced by step() once per round; returns their sum (add).
namespace eaglet::detail {

template <int C, class V, class Init, class Step, class Add>
inline V run_chains(long rounds, Init init, Step step, Add add) {
  V acc[C];
#pragma GCC unroll 16
  for (int i = 0; i < C; ++i) acc[i] = init(i);
  for (long r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < C; ++i) acc[i] = step(acc[i]);
  }
  V s = acc[0];
  for (int i = 1; i < C; ++i) s = add(s, acc[i]);
  return s;
}

}  // namespace eaglet::detail
