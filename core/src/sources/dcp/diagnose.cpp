// dcp::diagnose: the metadata's own consistency (tiling, storage items), then every item read once from its
// file: missing and cut files, items that are not what the metadata says, NaN/Inf, Adam steps.
#include "ckptdoc/sources/dcp/diagnose.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "ckptdoc/error.h"
#include "ckptdoc/format/pickle_safety.h"
#include "ckptdoc/format/zip_reader.h"
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/plural.h"

namespace ckptdoc::dcp {
namespace {

std::string adam_step_param(const std::string& key) {
  return optimizer_state_param(key, "step");
}

// The pickle of a torch.save zip (a bytes item's object); empty when it has none.
std::vector<uint8_t> pickle_record(const TorchFile& tf) {
  if (tf.format != TorchFormat::Zip) return {};
  const ZipReader zip(tf.file);
  for (const auto& z : zip.entries())
    if (z.name.ends_with("/data.pkl")) {
      const auto bytes = zip.data(z);
      return {bytes.begin(), bytes.end()};
    }
  return {};
}

class Diagnosis {
 public:
  explicit Diagnosis(const Checkpoint& ckpt) : ckpt_(ckpt), md_(ckpt.metadata()) {}

  Report run() {
    check_metadata();
    check_files();
    read_items();
    check_steps();
    for (auto& p : adam_moment_problems(r_.tensors, r_.adam_steps, r_.adam_moments_judged))
      r_.problems.push_back(std::move(p));
    std::stable_sort(r_.problems.begin(), r_.problems.end(),
                     [](const Problem& a, const Problem& b) { return a.severity > b.severity; });
    r_.files_read.assign(files_read_.begin(), files_read_.end());
    write_verdict();
    return std::move(r_);
  }

 private:
  // The code's severity from the table (model/finding_codes.h), or the one a site gives and says why.
  void add(model::Code code, std::string message, std::string file = {}, std::string key = {}) {
    add(code, model::default_severity(code), std::move(message), std::move(file), std::move(key));
  }
  void add(model::Code code, model::Severity severity, std::string message, std::string file = {},
           std::string key = {}) {
    r_.problems.push_back(problem(code, severity, std::move(message), std::move(file), std::move(key)));
  }

  void check_metadata() {
    for (const auto& h : md_.hazards)
      add(model::Code::UnsafePickle, model::severity_of(h.severity),  // the hazard's own severity
          ".metadata: " + h.callable + " reached by " + h.how + ": " + h.why, ".metadata");
    for (const auto& e : md_.entries) {
      for (auto& p : tiling_problems(e)) r_.problems.push_back(std::move(p));
      size_t without = 0;
      for (const auto& c : e.chunks) without += c.item ? 0 : 1;
      if (e.kind == EntryKind::Bytes && !e.bytes_item) without = 1;
      if (without)
        add(model::Code::DcpItemMissing,
            "'" + e.key + "': " + plural(without, "chunk") +
                " with no storage item in .metadata's storage_data",
            ".metadata", e.key);
    }
    for (const auto& u : md_.unreferenced_items)
      add(model::Code::DcpItemUnreferenced,
          "storage item " + u + " belongs to no chunk of .metadata's state_dict_metadata (a chunk removed?)",
          ".metadata");
  }

  // Storage files that are absent: one problem per file, with what it held.
  void check_files() {
    for (const auto& name : ckpt_.storage_files()) {
      try {
        (void)ckpt_.file(name);
      } catch (const Error& e) {
        std::set<std::string> keys;
        for (const auto& en : md_.entries) {
          if (en.bytes_item && en.bytes_item->file == name) keys.insert(en.key);
          for (const auto& c : en.chunks)
            if (c.item && c.item->file == name) keys.insert(en.key);
        }
        const bool missing = e.kind() == ErrorKind::NotFound;
        add(missing ? model::Code::DcpFileMissing : model::Code::DcpItemUnreadable,
            name + (missing ? " is missing" : std::string(" cannot be read: ") + e.what()) +
                ": it holds items of " + plural(keys.size(), "key") + " (" + *keys.begin() +
                (keys.size() > 1 ? ", ..." : "") + ")",
            name);
        bad_files_.insert(name);
      }
    }
  }

  // Opens one item; problems for what fails. nullopt when it could not be read.
  std::optional<TorchFile> open(const StorageItem& item, const std::string& key) {
    if (bad_files_.count(item.file)) return std::nullopt;
    const auto whole = ckpt_.file(item.file);
    if (item.offset > whole->size() || item.length > whole->size() - item.offset) {
      auto& t = truncated_[item.file];
      t.size = whole->size();
      t.end = std::max(t.end, item.offset + item.length);
      t.keys.insert(key);
      return std::nullopt;
    }
    try {
      TorchFile tf = ckpt_.open_item(item);
      files_read_.insert(item.file);
      // torch.save writes a CRC-32 per record: the only checksum a DCP checkpoint carries. A tensor of a
      // safetensors-serialized file has none.
      if (ckpt_.in_safetensors(item)) {
        ++unchecksummed_;
      } else if (tf.format == TorchFormat::Zip) {
        const ZipReader zip(tf.file);
        for (const auto& z : zip.entries())
          if (!zip.verify_crc(z)) {
            add(model::Code::DcpItemCrcMismatch,
                "'" + key + "', " + item_name(item) + ": record '" + z.name +
                    "' fails its CRC-32: its bytes changed after torch wrote them",
                item.file, key);
            break;
          }
        ++crc_checked_;
      }
      for (const auto& h : assess_pickle_uses(tf.pickle_uses, item_name(item)))
        if (h.severity == "error")
          add(model::Code::UnsafePickle, "'" + key + "', " + h.message(), item.file, key);
      return tf;
    } catch (const Error& e) {
      add(model::Code::DcpItemUnreadable, "'" + key + "', " + item_name(item) + ": " + e.what(), item.file,
          key);
      return std::nullopt;
    }
  }

  // Per-rank saves: every rank writes its own copy of a replicated item, and the merged view reads the lowest
  // rank's, so the others must hold the same or the ranks saved different states.
  template <class Same>
  void compare_replicas(const std::string& key, const StorageItem& kept,
                        const std::vector<StorageItem>& replicas, Same same) {
    for (const auto& rep : replicas) {
      const auto tf = open(rep, key);
      if (!tf) continue;
      ++replicas_compared_;
      bool equal = false;
      try {
        equal = same(*tf);
      } catch (const Error& err) {
        add(err.kind() == ErrorKind::Inconsistent ? model::Code::DcpItemMismatch
                                                  : model::Code::DcpItemUnreadable,
            "'" + key + "': " + err.what(), rep.file, key);
        continue;
      }
      if (!equal) {
        add(model::Code::DcpReplicaMismatch,
            "'" + key + "': " + item_name(kept) + " and " + item_name(rep) +
                " are copies of one item written by two ranks, and they differ: the per-rank metadata files "
                "come from saves of different states (ranks that saved at different steps, or one rank's "
                "files "
                "left from another save); the merged view reads " +
                kept.file + "'s",
            rep.file, key);
        return;
      }
    }
  }

  void read_items() {
    for (const auto& e : md_.entries) {
      if (e.kind == EntryKind::Bytes) {
        ++r_.bytes_items;
        if (!e.bytes_item) continue;
        if (const auto tf = open(*e.bytes_item, e.key)) {
          ++r_.bytes_items_read;
          compare_replicas(e.key, *e.bytes_item, e.bytes_replicas, [&](const TorchFile& other) {
            return pickle_record(other) == pickle_record(*tf);
          });
        }
        continue;
      }
      TensorSummary s;
      s.key = e.key;
      s.numel = e.numel();
      for (const auto& c : e.chunks) {
        if (!c.item) continue;
        const auto tf = open(*c.item, e.key);
        if (!tf) continue;
        try {
          const Tensor t = Checkpoint::chunk_tensor(e, c, *tf);
          for (float v : t.to_float()) {
            if (std::isnan(v))
              ++s.nan;
            else if (std::isinf(v))
              ++s.inf;
            else
              s.sum += v;
            s.zeros += v == 0;
            s.negative += v < 0;
          }
          t.check_unchanged();
          s.elements_read += t.numel();
          compare_replicas(e.key, *c.item, c.replicas, [&](const TorchFile& other) {
            return Checkpoint::chunk_tensor(e, c, other).to_bytes() == t.to_bytes();
          });
          // Each item is read once: hand its pages back, so memory stays at one chunk, not the checkpoint.
          ckpt_.file(c.item->file)->dont_need(c.item->offset, c.item->length);
        } catch (const Error& err) {
          add(err.kind() == ErrorKind::Inconsistent ? model::Code::DcpItemMismatch
                                                    : model::Code::DcpItemUnreadable,
              "'" + e.key + "': " + err.what(), c.item->file, e.key);
        }
      }
      if (s.nan || s.inf)
        add(model::Code::DcpNonFinite,
            "'" + e.key + "': " + std::to_string(s.nan) + " NaN and " + std::to_string(s.inf) + " Inf of " +
                std::to_string(s.elements_read) + " elements read",
            "", e.key);
      r_.elements_read += s.elements_read;
      if (const std::string p = adam_step_param(e.key); !p.empty() && s.numel == 1 && s.elements_read == 1)
        r_.adam_steps[p] = s.sum;
      r_.tensors.push_back(std::move(s));
    }
    for (const auto& [file, t] : truncated_)
      add(model::Code::DcpFileTruncated,
          file + " is " + std::to_string(t.size) + " bytes but .metadata places items up to byte " +
              std::to_string(t.end) + ": items of " + plural(t.keys.size(), "key") + " (" + *t.keys.begin() +
              (t.keys.size() > 1 ? ", ..." : "") + ") are cut off",
          file);
  }

  void check_steps() {
    std::map<double, std::vector<std::string>> by_step;
    for (const auto& [param, step] : r_.adam_steps) by_step[step].push_back(param);
    if (by_step.size() <= 1) return;
    std::string text;
    for (const auto& [step, params] : by_step)
      text += (text.empty() ? "" : "; ") + std::string("step ") +
              std::to_string(static_cast<long long>(step)) + ": " + plural(params.size(), "param") + " (" +
              params.front() + (params.size() > 1 ? ", ..." : "") + ")";
    add(model::Code::DcpAdamStepMismatch, "optimizer steps differ between params (" + text +
                                              "): state from different steps was mixed, or some params "
                                              "were frozen or skipped");
  }

  void write_verdict() {
    size_t errors = 0, warnings = 0, tensors = 0, complete = 0;
    for (const auto& p : r_.problems) {
      errors += p.severity == model::Severity::Error;
      warnings += p.severity == model::Severity::Warning;
    }
    for (const auto& t : r_.tensors) {
      ++tensors;
      complete += t.elements_read == t.numel;
    }
    int64_t elements = 0;
    for (const auto& t : r_.tensors) elements += t.numel;
    std::string basis =
        plural(tensors, "tensor") + ", " + std::to_string(r_.elements_read) +
        (r_.elements_read == elements ? "" : " of " + std::to_string(elements)) + " elements read from " +
        plural(r_.files_read.size(), "file") + " (" + std::to_string(r_.bytes_items_read) + " of " +
        std::to_string(r_.bytes_items) + " bytes items)" +
        (r_.adam_moments_judged ? ", Adam moments of " + plural(r_.adam_moments_judged, "param") +
                                      " judged against their steps (lost, negative)"
                                : "") +
        (replicas_compared_
             ? ", " + std::to_string(replicas_compared_) + " other ranks' copies of replicated items compared"
             : "");
    r_.clean = errors == 0 && tensors > 0 && complete == tensors;
    if (errors)
      r_.verdict = plural(errors, "error") + (warnings ? ", " + plural(warnings, "warning") : "") +
                   ". Checked: " + basis + ".";
    else if (tensors == 0)
      r_.verdict = "Nothing compared: the checkpoint holds no tensors.";
    else {
      r_.verdict = (warnings ? plural(warnings, "warning") + ". Checked: " : "No problems found. Checked: ") +
                   basis + "; chunks tile every tensor" +
                   (crc_checked_ ? "; the CRC-32s of " + plural(crc_checked_, "item") + " match" : "") +
                   "; no NaN/Inf";
      std::set<double> steps;
      for (const auto& [p, s] : r_.adam_steps) steps.insert(s);
      if (steps.size() == 1)
        r_.verdict += "; Adam step " + std::to_string(static_cast<long long>(*steps.begin())) + " for all " +
                      plural(r_.adam_steps.size(), "param");
      r_.verdict += ".";
    }
    // a safetensors-serialized folder has no zip items: no CRC-32 was checked, and the line must not say one
    // was
    r_.not_checked = {
        "no fp32-master comparison: a DCP checkpoint from FSDP2 keeps one copy of each weight",
        "no checksum of whole files: DCP records none" +
            (crc_checked_ ? " (the zip CRC-32s of " + plural(crc_checked_, "item") + " were checked)"
                          : std::string(" (and no item is a zip with CRC-32s)")),
    };
    if (unchecksummed_ > 0)
      r_.not_checked.push_back("no checksum of " + plural(unchecksummed_, "tensor item") +
                               " of safetensors-serialized files (serialization_format=SAFETENSORS): "
                               "safetensors records none");
    if (auto gap = moment_coverage_gap(md_)) r_.not_checked.push_back(std::move(*gap));
    if (r_.adam_moments_judged == 0)
      r_.not_checked.push_back(
          "no Adam moments judged: no optimizer.state.<param>.exp_avg/exp_avg_sq/step read whole");
    size_t step_keys = 0;
    for (const auto& t : r_.tensors) step_keys += !adam_step_param(t.key).empty() && t.numel == 1;
    if (step_keys == 0)
      r_.not_checked.push_back("no Adam step: no optimizer.state.<param>.step keys");
    else if (r_.adam_steps.size() < step_keys)
      r_.not_checked.push_back("the Adam steps of " + plural(step_keys - r_.adam_steps.size(), "param") +
                               ": their items could not be read");
  }

  struct Truncated {
    uint64_t size = 0, end = 0;
    std::set<std::string> keys;
  };
  const Checkpoint& ckpt_;
  const Metadata& md_;
  Report r_;
  std::set<std::string> bad_files_, files_read_;
  std::map<std::string, Truncated> truncated_;
  size_t replicas_compared_ = 0;  // per-rank saves: other ranks' copies compared with the one read
  size_t unchecksummed_ = 0;      // tensor items of safetensors-serialized files: no CRC to check
  size_t crc_checked_ = 0;        // items whose zip records were all checked against their CRC-32
};

}  // namespace

bool Report::has_error() const {
  return std::any_of(problems.begin(), problems.end(),
                     [](const Problem& p) { return p.severity == model::Severity::Error; });
}

Report diagnose(const Checkpoint& ckpt) {
  return Diagnosis(ckpt).run();
}

}  // namespace ckptdoc::dcp
