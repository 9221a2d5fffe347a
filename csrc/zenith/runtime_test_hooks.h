// The runtime's hooks for tests, outside its public header (runtime.h): nothing but
// runtime.cc and the tests include this.
#pragma once
#include <atomic>
#include <cstdint>

namespace zenith::test_hooks {
// Called (when set) by a call that found a packed-weight binding out of date, after its
// unlocked check and before it takes the packing lock, so that a test can make a
// drop_packed() or set_constant_inputs() land in that window every time.
extern void (*bind_packed_before_lock)();
// Counts the NodePlans build_plan prepares (not those it takes from an earlier plan).
extern std::atomic<uint64_t> node_plans_prepared;
}  // namespace zenith::test_hooks
