// Writes torch.save files (zip or legacy) that torch.load reads, streaming storage bytes from their source.
#include <map>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickler.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/format/zip_writer.h"

namespace ckptdoc {
namespace {

// Assigns keys "0", "1", ... to storages in the order the pickler meets them; a storage shared by several
// tensors keeps one key and is written once.
struct StorageKeys {
  std::map<const Storage*, std::string> keys;
  std::vector<std::shared_ptr<Storage>> order;
  std::string key_of(const std::shared_ptr<Storage>& s) {
    auto [it, inserted] = keys.emplace(s.get(), std::to_string(keys.size()));
    if (inserted) order.push_back(s);
    return it->second;
  }
};

void write_zip(ByteSink& sink, const Value& root, const TorchWriteOptions& options) {
  StorageKeys keys;
  PickleOptions po;
  po.storage_key = [&](const std::shared_ptr<Storage>& s) { return keys.key_of(s); };
  const std::vector<uint8_t> pkl = pickle(root, po);
  ZipWriter zip(sink);
  const std::string prefix = options.archive_name + "/";
  zip.add(prefix + "data.pkl", pkl);
  for (const auto& s : keys.order) {
    zip.add_streamed(prefix + "data/" + keys.keys[s.get()], s->nbytes(),
                     [&](ByteSink& out) { s->write_to(out); });
  }
  static constexpr uint8_t kVersion[] = {'3', '\n'};
  zip.add(prefix + "version", kVersion);
  zip.finish();
}

void write_u64le(ByteSink& sink, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  sink.write(b);
}

void write_legacy(ByteSink& sink, const Value& root) {
  static constexpr uint8_t kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                       0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
  static constexpr uint8_t kProtocol[] = {0x80, 0x02, 0x4d, 0xe9, 0x03, 0x2e};
  sink.write(kMagic);
  sink.write(kProtocol);
  Value sys_info = Value::dict();
  sys_info.set("protocol_version", Value::integer(1001));
  sys_info.set("little_endian", Value::boolean(true));
  Value sizes = Value::dict();
  sizes.set("short", Value::integer(2));
  sizes.set("int", Value::integer(4));
  sizes.set("long", Value::integer(4));
  sys_info.set("type_sizes", sizes);
  sink.write(pickle(sys_info));

  StorageKeys keys;
  PickleOptions po;
  po.legacy_persistent_ids = true;
  po.storage_key = [&](const std::shared_ptr<Storage>& s) { return keys.key_of(s); };
  sink.write(pickle(root, po));

  std::vector<Value> key_list;
  for (const auto& s : keys.order) key_list.push_back(Value::str(keys.keys[s.get()]));
  sink.write(pickle(Value::list(std::move(key_list))));
  for (const auto& s : keys.order) {
    write_u64le(sink, s->numel);
    const uint64_t start = sink.position();
    s->write_to(sink);
    if (sink.position() - start != s->nbytes())
      throw Error("", "storage '" + s->key + "'",
                  "its source wrote a different number of bytes than its size");
  }
}

}  // namespace

void write_torch(ByteSink& sink, const Value& root, const TorchWriteOptions& options) {
  if (options.format == TorchFormat::Zip)
    write_zip(sink, root, options);
  else
    write_legacy(sink, root);
}

void write_torch_file(const std::string& path, const Value& root, const TorchWriteOptions& options,
                      FileIo& io) {
  AtomicFile out(path, io);
  try {
    write_torch(out, root, options);
  } catch (const Error& e) {
    throw e.with_file(path);
  }
  out.commit();
}

}  // namespace ckptdoc
