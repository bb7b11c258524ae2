// zstd decoding of DCP storage items with libzstd's streaming API: torch's writer (zstandard's
// ZstdCompressor.stream_writer) records no content size in the frame header, so the output is grown chunk by
// chunk and the bound is checked before every step rather than trusted from the header.
#include "sources/dcp/zstd_item.h"

#include <zstd.h>

#include <algorithm>
#include <memory>

#include "ckptdoc/error.h"

namespace ckptdoc::dcp {
namespace {

// torch.save's zip of one tensor: data.pkl, byteorder, version, .data/serialization_id, .format_version,
// .storage_alignment, each record aligned to 64 bytes, and the directory. 64 KiB is far above that.
constexpr uint64_t kTorchSaveAllowance = uint64_t{64} << 10;
// A bytes item is a pickle of optimizer hyperparameters, a dataloader's or a scheduler's state: small.
constexpr uint64_t kMaxBytesItem = uint64_t{256} << 20;
constexpr size_t kStep = size_t{1} << 20;

struct DCtxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

}  // namespace

bool is_zstd_descriptor(const std::string& descriptor) {
  static const std::string prefix = "stream.zstd/";
  if (descriptor.rfind(prefix, 0) != 0) return false;
  const std::string version = descriptor.substr(prefix.size());
  return version == "1" || version.rfind("1.", 0) == 0;
}

uint64_t max_decoded_tensor_item(uint64_t data_bytes) {
  return data_bytes + kTorchSaveAllowance;
}

uint64_t max_decoded_bytes_item() {
  return kMaxBytesItem;
}

std::vector<uint8_t> decode_zstd_item(std::span<const uint8_t> stream, uint64_t max_size,
                                      const std::string& path, const std::string& where) {
  auto fail = [&](const std::string& what) {
    throw Error(ErrorKind::Corrupt, path, where, "zstd item (torch's ZStandard extension): " + what);
  };
  // A frame that states its size is checked against the bound before anything is decoded.
  if (const unsigned long long declared = ZSTD_getFrameContentSize(stream.data(), stream.size());
      declared == ZSTD_CONTENTSIZE_ERROR)
    fail("not a zstd frame (bad magic or header)");
  else if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared > max_size)
    fail("the frame says it holds " + std::to_string(declared) + " bytes, more than the " +
         std::to_string(max_size) + " the item's metadata allows");
  std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  if (!ctx) throw Error(ErrorKind::Io, path, where, "libzstd could not allocate a decoder");
  std::vector<uint8_t> out;
  ZSTD_inBuffer in{stream.data(), stream.size(), 0};
  size_t last = 0;  // 0 once a frame is complete: what ZSTD_decompressStream returns at a frame's end
  while (true) {
    // One byte past the bound is room enough to see that the item holds more than it may.
    const uint64_t room = std::min<uint64_t>(kStep, max_size + 1 - out.size());
    const size_t at = out.size();
    out.resize(at + room);
    ZSTD_outBuffer o{out.data() + at, static_cast<size_t>(room), 0};
    last = ZSTD_decompressStream(ctx.get(), &o, &in);
    out.resize(at + o.pos);
    if (ZSTD_isError(last)) fail(std::string("does not decode: ") + ZSTD_getErrorName(last));
    if (out.size() > max_size)
      fail("decodes to more than the " + std::to_string(max_size) + " bytes the item's metadata allows");
    // Done when the input is used up and the decoder holds nothing more (output space left over).
    if (in.pos == in.size && o.pos < o.size) break;
  }
  if (last != 0)
    fail("cut short: its last frame ends unfinished after " + std::to_string(stream.size()) +
         " bytes (decoded " + std::to_string(out.size()) + ")");
  return out;
}

}  // namespace ckptdoc::dcp
