#include "refresh_mains.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/io/fs_error.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/sources/dcp/checkpoint.h"
#include "io/path_relation.h"
#include "main_params.h"

namespace ckptdoc::megatron {
namespace fs = std::filesystem;
namespace {

uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | p[1] << 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Where, inside one stored torch.save zip (`zip`, the item's bytes), a record's CRC-32 is kept: its central
// directory entry, and the data descriptor after its data when the local header defers to one (torch's writer
// sets flag bit 3 and leaves the local header's CRC 0), else the local header.
std::vector<size_t> crc_fields(std::span<const uint8_t> zip, const ZipEntry& e, const std::string& where) {
  auto bad = [&](const std::string& what) { return Error(ErrorKind::Unsupported, where, e.name, what); };
  size_t eocd = std::string::npos;
  for (size_t i = zip.size() >= 22 ? zip.size() - 22 : 0; i + 1 > 0 && zip.size() - i < 65557; --i)
    if (u32(&zip[i]) == 0x06054b50) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) throw bad("no end of central directory");
  const uint32_t cd = u32(&zip[eocd + 16]);
  const uint16_t count = u16(&zip[eocd + 10]);
  if (cd == 0xffffffffu || count == 0xffff) throw bad("a ZIP64 item is not rewritten yet");
  std::vector<size_t> out;
  for (size_t at = cd, n = 0; n < count && at + 46 <= zip.size(); ++n) {
    if (u32(&zip[at]) != 0x02014b50) throw bad("central directory entry expected");
    const size_t name_len = u16(&zip[at + 28]), extra = u16(&zip[at + 30]), comment = u16(&zip[at + 32]);
    if (at + 46 + name_len > zip.size()) throw bad("central directory runs past the item");
    if (std::string_view(reinterpret_cast<const char*>(&zip[at + 46]), name_len) == e.name)
      out.push_back(at + 16);
    at += 46 + name_len + extra + comment;
  }
  if (out.size() != 1) throw bad("not one central directory entry");
  const size_t local = e.header_offset;
  if (local + 30 > zip.size()) throw bad("local header runs past the item");
  if (u16(&zip[local + 6]) & 0x8) {
    size_t d = e.data_offset + e.compressed_size;
    if (d + 4 <= zip.size() && u32(&zip[d]) == 0x08074b50) d += 4;
    if (d + 4 > zip.size()) throw bad("data descriptor runs past the item");
    out.push_back(d);
  } else {
    out.push_back(local + 14);
  }
  return out;
}

// The float32 bytes of `box` (the weight's dtype) upcast, little-endian.
std::vector<uint8_t> upcast(const std::vector<uint8_t>& box, DType lp) {
  const Tensor t = Tensor::from_bytes(lp, {static_cast<int64_t>(box.size() / element_size(lp))}, box);
  const auto f = t.to_float();
  std::vector<uint8_t> out(f.size() * 4);
  std::memcpy(out.data(), f.data(), out.size());
  return out;
}

// Rewrites one main chunk of the copy at `copy_dir` (same file names and offsets as the input).
void rewrite_chunk(const dcp::Checkpoint& in, const MainPair& pair, const dcp::Chunk& chunk,
                   const std::vector<uint8_t>& data, const std::string& copy_dir) {
  const auto& item = *chunk.item;
  const std::string where = item.file + " (" + pair.main->key + ")";
  const TorchFile tf = in.open_item(item);
  const Tensor stored = dcp::Checkpoint::chunk_tensor(*pair.main, chunk, tf);
  const auto whole = in.file(item.file);
  const auto view = MappedFile::view(whole, item.offset, item.length, item.file);
  const ZipReader zip(view);
  const ZipEntry* record = nullptr;
  for (const auto& e : zip.entries())
    if (e.name.rfind(tf.archive_name + "/data/", 0) == 0) {
      if (record) throw Error(ErrorKind::Unsupported, where, "", "holds more than one storage record");
      record = &e;
    }
  if (!record || stored.dtype != DType::F32 || !stored.is_contiguous() || stored.storage_offset != 0 ||
      record->size != data.size() || record->method != 0)
    throw Error(ErrorKind::Unsupported, where, "",
                "not a plain contiguous float32 record of the chunk's size: not rewritten");
  const auto bytes = view->bytes();
  const auto fields = crc_fields(bytes, *record, where);
  uint8_t crc[4];
  put32(crc, crc32(data));
  std::fstream f(copy_dir + "/" + item.file, std::ios::in | std::ios::out | std::ios::binary);
  auto put = [&](uint64_t at, const uint8_t* p, size_t n) {
    f.seekp(static_cast<std::streamoff>(item.offset + at));
    f.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  put(record->data_offset, data.data(), data.size());
  for (size_t at : fields) put(at, crc, 4);
  f.flush();
  if (!f) throw Error(ErrorKind::Io, copy_dir + "/" + item.file, "", "could not be rewritten");
}

}  // namespace

RefreshResult refresh_main_params(const std::string& path, const std::string& output) {
  const auto folder = resolve(path);
  if (output.empty()) throw Error(ErrorKind::InvalidRequest, "", "--output", "an output folder is required");
  const std::string out = io::normalised_path(output);
  if (io::inside_or_equal(out, io::normalised_path(path)) ||
      io::inside_or_equal(out, io::normalised_path(folder.dir)))
    throw Error(ErrorKind::InvalidRequest, out, "--output",
                "is inside the checkpoint folder " + io::normalised_path(path) +
                    "; choose a path outside it (the input is never modified)");
  if (fs::exists(fs::symlink_status(out)))
    throw Error(ErrorKind::InvalidRequest, out, "--output", "exists; repair writes a new folder");

  const auto in = dcp::Checkpoint::open(folder.dir);
  std::vector<std::string> not_paired;
  const auto pairs = main_pairs(in->metadata(), not_paired);
  if (pairs.empty())
    throw Error(
        ErrorKind::Unsupported, folder.dir, "--refresh-fp32",
        "holds no optimizer.state.fp32_param.<key> or optimizer.state.param.<key> beside a bf16 or fp16 "
        "weight: nothing to refresh");
  if (!not_paired.empty())
    throw Error(ErrorKind::Unsupported, folder.dir, "--refresh-fp32", "cannot refresh " + not_paired.front());

  RefreshResult r;
  r.output = out;
  const std::string tmp = out + ".ckptdoc-tmp-" + std::to_string(::getpid());
  std::error_code gone;
  fs::remove_all(tmp, gone);  // a leftover of a run that was killed (named by that run's pid)
  const bool save_folder = !folder.tracker.empty();
  const std::string iter_name = fs::path(folder.dir).filename().string();
  const std::string tmp_iter = save_folder ? tmp + "/" + iter_name : tmp;
  try {
    fs::create_directories(fs::path(tmp_iter).parent_path());
    // all of it, folders too (megatron-core 0.19 keeps its common state in common_state/); links are followed
    fs::copy(folder.dir, tmp_iter, fs::copy_options::recursive);
    if (save_folder) fs::copy_file(folder.tracker, tmp + "/" + std::string(kTracker));

    const auto& md = in->metadata();
    for (const auto& pair : pairs) {
      const auto weight = read_weight(*in, pair);
      for (const auto& chunk : pair.main->chunks) {
        if (!chunk.item)
          throw Error(ErrorKind::Inconsistent, folder.dir, pair.main->key, "a chunk has no storage item");
        rewrite_chunk(*in, pair, chunk, upcast(weight_box(weight, pair, chunk), pair.lp), tmp_iter);
        ++r.chunks;
      }
      ++r.params;
      r.prefix = pair.prefix;
      for (const char* moment : {"optimizer.state.exp_avg.", "optimizer.state.exp_avg_sq."})
        if (!md.find(moment + pair.key)) {
          r.absent_moments.push_back(pair.key);
          break;
        }
    }
    // The copy is checked before it is published: every main now the exact upcast of its weight.
    const auto check = compare_main_params(*dcp::Checkpoint::open(tmp_iter));
    if (check.params.size() != r.params || !check.not_compared.empty())
      throw Error(ErrorKind::Inconsistent, tmp_iter, "--refresh-fp32",
                  "the copy's mains could not all be compared");
    for (const auto& p : check.params)
      if (p.lp_vs_fp32->exact != p.lp_vs_fp32->count || p.lp_vs_fp32->max_abs != 0)
        throw Error(ErrorKind::Inconsistent, tmp_iter, p.name, "the refreshed main is not its weight upcast");
    fs::rename(tmp, out);
  } catch (const fs::filesystem_error& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw io::error_from(e);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  r.iteration_dir = save_folder ? out + "/" + iter_name : out;
  return r;
}

}  // namespace ckptdoc::megatron
