#pragma once
// The optimizer step floats of a torch.save pickle (protocol 2), found where they lie so a repair can give
// them 0.0's bytes in place (the pickle's length and every other byte kept): common.pt's param groups
// (reset_optimizer.h) and a bucket-space save's ShardedObject optimizer/shard_* (reset_bucket_optimizer.h).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ckptdoc::megatron {

// BINFLOAT (pickle opcode 'G', a big-endian IEEE double) of `v`.
std::vector<uint8_t> binfloat(double v);

// Where each param group's step float lies in the pickle `pkl`: the BINFLOAT `value` right after the key
// "step", which torch.save's protocol 2 spells once as BINUNICODE "step" with a memo put (BINPUT 'q' /
// LONG_BINPUT 'r') and then as a memo get of that index (BINGET 'h' / LONG_BINGET 'j'). Only floats after
// that key are taken, so other floats of the same value (lr_mult 1.0 beside a step of 1) are left alone.
std::vector<size_t> step_floats(const std::vector<uint8_t>& pkl, const std::vector<uint8_t>& value);

}  // namespace ckptdoc::megatron
