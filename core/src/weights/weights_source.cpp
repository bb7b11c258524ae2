// Opening Hugging Face folders and weights files, and the structural checks of an index against its shards.
#include "ckptdoc/weights/weights_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "ckptdoc/error.h"
#include "ckptdoc/format/torch_file.h"
#include "ckptdoc/io/mapped_file.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/short_list.h"
#include "weights/dcp_sharding_info.h"

namespace fs = std::filesystem;

namespace ckptdoc::weights {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string strip_module(const std::string& n) {
  std::string s = n;
  while (s.rfind("module.", 0) == 0) s = s.substr(7);
  return s;
}

bool weights_extension(const std::string& name) {
  return ends_with(name, ".safetensors") || ends_with(name, ".bin") || ends_with(name, ".pt") ||
         ends_with(name, ".pth");
}

// Index and config files are small; a huge one is refused rather than read into memory.
constexpr uint64_t kMaxJsonBytes = 100'000'000;

std::string read_file_text(const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxJsonBytes)
    throw Error(ErrorKind::Unsupported, path, "",
                expected_found("a JSON file of at most " + std::to_string(kMaxJsonBytes) + " bytes",
                               std::to_string(size) + " bytes"));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_float(DType d) {
  return d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64;
}

// The state dict inside a torch.save file: the root, or one nested under a usual key when the root holds
// none.
const Value* state_dict_of(const Value& root) {
  if (!root.is_dict()) return nullptr;
  for (const auto& [k, v] : root.as_dict().items)
    if (v.is_tensor()) return &root;
  for (const char* key : {"state_dict", "model", "module"}) {
    const Value* inner = root.get(key);
    if (inner && inner->is_dict()) return inner;
  }
  return &root;
}

struct ParsedFile {
  std::vector<NamedTensor> tensors;
  size_t skipped = 0;  // entries that are not tensors
};

}  // namespace

bool not_weights(const std::string& name) {
  static const std::regex other(
      R"((training_args|optimizer|scheduler|scaler|rng_state(_\d+)?)\.(bin|pt|pth))");
  return std::regex_match(name, other);
}

std::vector<std::string> training_state_files(const std::string& dir) {
  static const std::regex state(
      R"((optimizer(_\d+)?|scheduler(_\d+)?|scaler(_\d+)?|rng_state(_\d+)?)\.(bin|pt|pth)|random_states_\d+\.pkl)");
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file(ec) && std::regex_match(name, state)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> WeightsSource::weights_in_folder(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"model.safetensors.index.json", "model.safetensors",
                           "pytorch_model.bin.index.json", "pytorch_model.bin"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return std::nullopt;
}

std::shared_ptr<const WeightsSource> WeightsSource::open(const std::string& path) {
  std::shared_ptr<WeightsSource> s(new WeightsSource());
  std::error_code ec;
  const fs::path abs = fs::absolute(fs::path(path), ec).lexically_normal();
  if (!fs::exists(abs, ec)) throw Error(ErrorKind::NotFound, path, "", "no such file or folder");
  s->path_ = abs.string();
  if (fs::is_directory(abs, ec)) {
    s->kind_ = SourceKind::HfFolder;
    s->root_ = abs.string();
    s->read_config();
    s->open_folder(abs.string());
  } else if (ends_with(abs.filename().string(), ".index.json")) {
    s->kind_ = SourceKind::HfFolder;
    s->root_ = abs.parent_path().string();
    s->read_config();
    s->read_index(abs.string());
  } else {
    s->kind_ = SourceKind::WeightsFile;
    s->root_ = abs.parent_path().string();
    s->read_config();
    s->open_single(abs.string());
  }
  return s;
}

void WeightsSource::problem(model::Code code, std::string message, std::string file,
                            std::vector<std::string> tensors) {
  problem(code, model::default_severity(code), std::move(message), std::move(file), std::move(tensors));
}

void WeightsSource::problem(model::Code code, model::Severity severity, std::string message, std::string file,
                            std::vector<std::string> tensors) {
  problems_.emplace_back(code, severity, std::move(message), std::move(file), std::vector<int>{},
                         std::move(tensors));
}

void WeightsSource::read_config() {
  const fs::path p = fs::path(root_) / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file_text(p.string()), nullptr, /*allow_exceptions=*/false);
  } catch (const Error&) {
  }
  if (!j.is_object()) {
    problem(model::Code::ConfigUnreadable,
            "config.json is not a JSON object; sizes it would imply are not checked", "config.json");
    return;
  }
  for (const char* key : {"hidden_size", "n_embd", "d_model", "vocab_size", "intermediate_size",
                          "num_hidden_layers", "n_layer", "num_attention_heads"}) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_number_integer() && it->get<int64_t>() > 0)
      config_sizes_[key] = it->get<int64_t>();
  }
}

void WeightsSource::open_folder(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec)) names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  // An index first: safetensors before torch, the usual name before others.
  for (const char* ext : {".safetensors.index.json", ".bin.index.json"}) {
    std::vector<std::string> found;
    for (const auto& n : names)
      if (ends_with(n, ext)) found.push_back(n);
    if (found.empty()) continue;
    const std::string usual = std::string(ext[1] == 's' ? "model" : "pytorch_model") + ext;
    const std::string pick = std::count(found.begin(), found.end(), usual) ? usual : found.front();
    read_index((fs::path(dir) / pick).string());
    return;
  }
  std::vector<std::string> candidates;
  for (const char* usual : {"model.safetensors", "pytorch_model.bin"})
    if (std::count(names.begin(), names.end(), usual)) {
      open_single((fs::path(dir) / usual).string());
      return;
    }
  for (const auto& n : names)
    if (weights_extension(n) && !not_weights(n)) candidates.push_back(n);
  if (candidates.empty())
    throw Error(ErrorKind::NotFound, dir, "",
                "no weights here: no *.safetensors.index.json, model.safetensors, pytorch_model.bin or other "
                ".safetensors / .bin / .pt file (and no DeepSpeed `latest` or rank files)");
  if (candidates.size() > 1) {
    problem(
        model::Code::IndexMissing,
        "the folder holds " + std::to_string(candidates.size()) + " weights files (" +
            short_list(candidates) +
            ") and no index: Hugging Face loaders look for model.safetensors or an index and find neither",
        candidates.front());
  }
  for (const auto& n : candidates) add_file((fs::path(dir) / n).string(), "");
  check_index();
}

void WeightsSource::open_single(const std::string& file) {
  add_file(file, "");
  if (!files_.front().readable) {
    const auto p = problems_.back();
    throw Error(files_.front().error_kind, file, "", p.message);
  }
  check_index();
}

void WeightsSource::read_index(const std::string& index_path) {
  WeightsIndex index;
  index.path = fs::path(index_path).filename().string();
  const std::string dir = fs::path(index_path).parent_path().string();
  const std::string family = index.path.substr(0, index.path.size() - std::string(".index.json").size());
  bool usable = false;
  try {
    const auto j = nlohmann::json::parse(read_file_text(index_path));
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(ErrorKind::Corrupt, index_path, "weight_map", "missing or not an object");
    if (j.contains("metadata") && j["metadata"].is_object()) {
      const auto& m = j["metadata"];
      if (m.contains("total_size") && m["total_size"].is_number_integer())
        index.total_size = m["total_size"].get<uint64_t>();
      if (m.contains("total_parameters") && m["total_parameters"].is_number_integer())
        index.total_parameters = m["total_parameters"].get<uint64_t>();
    }
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw Error(ErrorKind::Corrupt, index_path, "weight_map['" + name + "']",
                    expected_found("a file name", file.dump()));
      index.weight_map.emplace_back(name, file.get<std::string>());
    }
    usable = true;
  } catch (const std::exception& e) {
    problem(model::Code::IndexUnreadable,
            index.path + " cannot be read (" + e.what() + "); the shards in the folder are read without it",
            index.path);
  }
  // The shards the index names, in file-name order; every other shard of its family is never loaded.
  std::set<std::string> named;
  for (const auto& [t, f] : index.weight_map) named.insert(f);
  const std::string stem = family.substr(0, family.rfind('.'));
  const std::string ext = family.substr(family.rfind('.'));
  const std::regex numbered(std::regex_replace(stem, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                            R"(-\d{5,}-of-\d{5,})" + std::regex_replace(ext, std::regex(R"(\.)"), R"(\.)"));
  std::vector<std::string> stray;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (it->is_regular_file(ec) && std::regex_match(n, numbered) && !named.count(n)) stray.push_back(n);
  }
  std::sort(stray.begin(), stray.end());
  if (usable) index_ = std::move(index);
  std::vector<std::string> order(named.begin(), named.end());
  if (!usable) order = stray;
  for (const auto& f : order) {
    const fs::path p = fs::path(dir) / f;
    if (!fs::is_regular_file(p, ec)) {
      std::vector<std::string> lost;
      for (const auto& [t, file] : index_->weight_map)
        if (file == f) lost.push_back(t);
      problem(model::Code::IndexShardMissing,
              index_->path + " names " + f + ", which is not in the folder: its " +
                  std::to_string(lost.size()) + " tensors (" + short_list(lost) + ") cannot be loaded",
              f, lost);
      continue;
    }
    add_file(p.string(), f);
  }
  if (usable) {
    for (const auto& f : stray) {
      std::string message = f;  // appended piece by piece: this runs per stray shard
      message += " looks like a shard of ";
      message += family;
      message += " but ";
      message += index_->path;
      message +=
          " does not name it: loaders never read it (left from an earlier save with another shard count?)";
      problem(model::Code::ShardUnindexed, std::move(message), f);
    }
  }
  check_index();
}

void WeightsSource::add_file(const std::string& abs_path, const std::string& /*preferred_for*/) {
  WeightsFile wf;
  wf.abs_path = abs_path;
  std::error_code ec;
  wf.path = fs::path(abs_path).lexically_relative(root_).string();
  if (wf.path.empty() || wf.path.rfind("..", 0) == 0) wf.path = fs::path(abs_path).filename().string();
  wf.bytes = fs::file_size(abs_path, ec);
  std::vector<NamedTensor> parsed;
  std::optional<DcpPiece> dcp_piece;  // set: the file carries DCP_SHARDING_INFO (HuggingFaceStorageWriter)
  try {
    auto mapped = MappedFile::open(abs_path);
    const auto head = mapped->bytes().subspan(0, std::min<size_t>(mapped->bytes().size(), 64));
    if (SafetensorsFile::looks_like_safetensors(head, mapped->size())) {
      wf.format = "safetensors";
      auto st = std::make_shared<SafetensorsFile>(SafetensorsFile::open(abs_path));
      dcp_piece = weights::dcp_piece_in(st->metadata, abs_path);
      for (const auto& e : st->entries) {
        parsed.push_back({e.name, e.tensor});
        wf.stored_bytes += e.tensor.nbytes();
        wf.stored_numel += static_cast<uint64_t>(e.tensor.numel());
      }
      keep_.push_back(st);
    } else if (TorchFile::is_torch_file(head)) {
      wf.format = "torch";
      auto tf = std::make_shared<TorchFile>(TorchFile::open(mapped));
      const Value* sd = state_dict_of(tf->root);
      if (!sd)
        throw Error(ErrorKind::Unsupported, abs_path, "",
                    expected_found("a state dict (a dict of name -> tensor)", tf->root.type_name()));
      size_t skipped = 0;
      std::set<const Storage*> storages;
      for (const auto& [k, v] : sd->as_dict().items) {
        if (!k.is(Value::Kind::Str) || !v.is_tensor()) {
          ++skipped;
          continue;
        }
        parsed.push_back({k.as_str(), v.as_tensor()});
        if (storages.insert(v.as_tensor().storage.get()).second) {
          wf.stored_bytes += v.as_tensor().nbytes();
          wf.stored_numel += static_cast<uint64_t>(v.as_tensor().numel());
        }
      }
      if (skipped)
        problem(model::Code::NonTensorEntries,
                wf.path + " holds " + std::to_string(skipped) +
                    " entries that are not named tensors; they are skipped",
                wf.path);
      keep_.push_back(tf);
    } else {
      throw Error(ErrorKind::Unsupported, abs_path, "offset 0",
                  "neither a safetensors file nor a torch.save file");
    }
    wf.readable = true;
  } catch (const std::exception& e) {
    problem(model::Code::ShardUnreadable, wf.path + " cannot be read: " + e.what(), wf.path);
    if (const auto* err = dynamic_cast<const Error*>(&e)) wf.error_kind = err->kind();
  }
  // Read on, its pieces would pass for whole tensors of the wrong shape: refused, never reported on. Only the
  // save_distributed=False writer (the whole state dict from rank 0) writes an index, and every offset is 0.
  const bool indexed = index_ && std::any_of(index_->weight_map.begin(), index_->weight_map.end(),
                                             [&](const auto& entry) { return entry.second == wf.path; });
  if (dcp_piece && (dcp_piece->at_offset || !indexed))
    throw Error(
        ErrorKind::Unsupported, abs_path, "__metadata__ DCP_SHARDING_INFO",
        std::string(dcp_piece->at_offset ? "" : "taken for ") +
            "a piece of a sharded save by torch's HuggingFaceStorageWriter(save_distributed=True): " +
            dcp_piece->described +
            (dcp_piece->at_offset ? " is part of a larger tensor"
                                  : " may be only part of its tensor (no model.safetensors.index.json of a "
                                    "whole-state-dict save names this file; open the folder holding one, if "
                                    "it is such a save)") +
            "; such a save records no tensor's whole shape, so neither that nor whether every rank's "
            "piece is present can be known, and assembling the ranks' pieces is not supported: no value "
            "of this folder was checked (a save with enable_consolidation=True also writes whole tensors "
            "beside its sharded/ folder)");
  for (const auto& t : parsed) {
    wf.tensors.push_back(t.name);
    holders_[t.name].push_back(wf.path);
  }
  // The tensor a loader takes: the one in the file the index names for it, else the first one met.
  for (auto& t : parsed) {
    const std::string key = strip_module(t.name);
    const auto it = by_name_.find(key);
    bool take = it == by_name_.end();
    if (!take && index_) {
      for (const auto& [n, f] : index_->weight_map)
        if (n == t.name && f == wf.path) take = true;
    }
    if (!take) continue;
    if (it != by_name_.end()) {
      tensors_[it->second] = t;
      tensor_files_[it->second] = wf.path;
    } else {
      by_name_[key] = tensors_.size();
      tensors_.push_back(t);
      tensor_files_.push_back(wf.path);
    }
  }
  files_.push_back(std::move(wf));
}

void WeightsSource::check_index() {
  // A name in two files: which one a loader keeps depends on the loader.
  for (const auto& [name, files] : holders_) {
    if (files.size() < 2) continue;
    problem(model::Code::TensorDuplicated,
            "'" + name + "' is stored in " + std::to_string(files.size()) + " files (" + short_list(files) +
                "): which one a loader keeps depends on the order it reads them",
            files.front(), {name});
  }
  if (index_) {
    std::map<std::string, std::string> map(index_->weight_map.begin(), index_->weight_map.end());
    for (const auto& f : files_) {
      if (!f.readable) continue;
      // Named here by the index but not held.
      std::vector<std::string> missing, elsewhere;
      for (const auto& [t, file] : index_->weight_map) {
        if (file != f.path || std::count(f.tensors.begin(), f.tensors.end(), t)) continue;
        missing.push_back(t);
        const auto h = holders_.find(t);
        if (h != holders_.end()) elsewhere.push_back(t + " (in " + h->second.front() + ")");
      }
      if (!missing.empty())
        problem(model::Code::IndexTensorMissing,
                index_->path + " maps " + std::to_string(missing.size()) + " tensors to " + f.path +
                    ", which does not hold them: " + short_list(missing) +
                    (elsewhere.empty() ? "" : "; found elsewhere: " + short_list(elsewhere)),
                f.path, missing);
      // Held here but not named by the index at all.
      std::vector<std::string> unindexed;
      for (const auto& t : f.tensors)
        if (!map.count(t)) unindexed.push_back(t);
      if (!unindexed.empty())
        problem(model::Code::ShardTensorUnindexed,
                f.path + " holds " + std::to_string(unindexed.size()) + " tensors that " + index_->path +
                    " does not name (" + short_list(unindexed) +
                    "): a loader that goes by the index never maps them",
                f.path, unindexed);
    }
    const bool all_read =
        std::all_of(files_.begin(), files_.end(), [](const WeightsFile& f) { return f.readable; }) &&
        std::none_of(problems_.begin(), problems_.end(), [](const model::Finding& p) {
          return p.code == model::code_name(model::Code::IndexShardMissing);
        });
    uint64_t bytes = 0, numel = 0;
    for (const auto& f : files_) {
      bytes += f.stored_bytes;
      numel += f.stored_numel;
    }
    if (all_read && index_->total_size && *index_->total_size != bytes)
      problem(model::Code::IndexTotalMismatch,
              index_->path + " says metadata.total_size " + std::to_string(*index_->total_size) +
                  " but its shards store " + std::to_string(bytes) +
                  " bytes of tensors: the index was written for other shards, or shards changed",
              index_->path);
    if (all_read && index_->total_parameters && *index_->total_parameters != numel)
      problem(model::Code::IndexTotalMismatch,
              index_->path + " says metadata.total_parameters " + std::to_string(*index_->total_parameters) +
                  " but its shards hold " + std::to_string(numel) + " elements",
              index_->path);
  }
  // Empty tensors where a real model has none: ZeRO-3 16-bit saves without gathering write placeholders.
  std::vector<std::string> empty;
  std::string empty_file;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i].tensor;
    if (t.numel() != 0) continue;
    empty.push_back(tensors_[i].name + " " +
                    (t.shape.size() == 1 && t.shape[0] == 0 ? "[0]" : "(0 elements)"));
    if (empty_file.empty()) empty_file = tensor_files_[i];
  }
  if (!empty.empty()) {
    std::vector<std::string> names;
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].tensor.numel() == 0) names.push_back(tensors_[i].name);
    std::string config;
    for (const auto& [k, v] : config_sizes_)
      config += (config.empty() ? "" : ", ") + k + " " + std::to_string(v);
    // Without a config.json to say the real sizes an empty tensor may be intended: a warning, not an error.
    problem(model::Code::PlaceholderTensor,
            config.empty() ? model::Severity::Warning : model::Severity::Error,
            std::to_string(empty.size()) + " of " + std::to_string(tensors_.size()) + " tensors are empty (" +
                short_list(empty) + ", first in " + empty_file + ")" +
                (config.empty()
                     ? ""
                     : " although config.json implies real sizes (" + config +
                           "): placeholders, as a ZeRO-3 model saved without "
                           "stage3_gather_16bit_weights_on_model_save writes them. Export the weights from "
                           "the DeepSpeed checkpoint instead (ckptdoc export)"),
            empty_file, names);
  }
  // Floating tensors in several dtypes: usually one param group saved from another precision.
  std::map<DType, std::vector<std::string>> by_dtype;
  for (const auto& t : tensors_)
    if (is_float(t.tensor.dtype)) by_dtype[t.tensor.dtype].push_back(t.name);
  if (by_dtype.size() > 1) {
    DType main = main_dtype();
    std::string counts;
    std::vector<std::string> minority;
    for (const auto& [d, names] : by_dtype) {
      counts +=
          (counts.empty() ? "" : ", ") + std::to_string(names.size()) + " " + std::string(dtype_name(d));
      if (d != main) minority.insert(minority.end(), names.begin(), names.end());
    }
    problem(model::Code::MixedDtypes,
            "floating tensors are stored in several dtypes (" + counts + "); not " +
                std::string(dtype_name(main)) + ": " + short_list(minority) +
                ". Loaders cast them to the model's dtype; check this is intended",
            files_.empty() ? "" : files_.front().path, minority);
  }
}

const NamedTensor* WeightsSource::find(const std::string& name) const {
  const auto it = by_name_.find(strip_module(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

DType WeightsSource::main_dtype() const {
  std::map<DType, uint64_t> numel;
  for (const auto& t : tensors_)
    if (is_float(t.tensor.dtype)) numel[t.tensor.dtype] += static_cast<uint64_t>(t.tensor.numel()) + 1;
  DType best = DType::F32;
  uint64_t most = 0;
  for (const auto& [d, n] : numel)
    if (n > most) {
      most = n;
      best = d;
    }
  return best;
}

}  // namespace ckptdoc::weights
