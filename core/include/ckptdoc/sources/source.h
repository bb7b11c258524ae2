#pragma once
// A Source is one checkpoint format ckptdoc reads (#27). The CLI asks the registry (sources/registry.h) which
// source reads a path instead of testing formats by hand, and a command a source cannot do is refused with
// one message built from its capabilities.
//
// Two kinds of source for now: the DeepSpeed family (rank files, universal, live snapshots, Hugging Face
// weights) is read into the catalog (deepspeed::Checkpoint), whose front ends every command already has;
// any other source reports itself through inspect / diagnose / export below, as neutral text the CLI prints.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckptdoc/error.h"
#include "ckptdoc/format/safetensors.h"  // NamedTensor
#include "ckptdoc/model/finding_codes.h"
#include "ckptdoc/sources/deepspeed/export_options.h"  // NonFiniteTensor
#include "ckptdoc/sources/storage_map.h"
#include "ckptdoc/task/progress.h"

namespace ckptdoc::sources {

// The CLI's commands that read a checkpoint.
enum class Command : uint8_t { Inspect, Diagnose, Export, Repair, Convert, Diff, Watch };
std::string_view command_name(Command command);  // "inspect"

struct InspectRequest {
  std::string path;
  bool json = false;
};

struct DiagnoseRequest {
  std::string path;
  bool json = false;
  // `diagnose --verify-checksums` (the views' "Verify checksums"): a source with a hash list hashes every
  // file against it (Megatron-core's integrity.json); one without says so. Off: the verdict says what was not
  // verified.
  bool verify_checksums = false;
  // The front end's progress (bytes hashed) and cancel (throws Cancelled). Null: neither.
  Progress* progress = nullptr;
};

// Export of the weights as stored, in safetensors: what every self-reporting source's export writes.
struct ExportRequest {
  std::string path;
  std::string output;
  std::optional<uint64_t> max_shard_size;  // shards in a folder (weights/shards.h); unset: one file
  bool force = false;                      // replace an existing output
  bool torch = false;                      // torch.save output (one file, or torch shards): exports_torch()
  bool strict = false;                     // NaN/Inf fails the export
  bool json = false;
  bool quiet = false;  // no text summary (the JSON form is printed regardless)
  // The front end's progress (bytes written) and cancel: checked between steps of a few MiB, and a cancelled
  // export throws Cancelled with nothing published. Null: neither (the CLI).
  Progress* progress = nullptr;
};

// `repair PATH -o OUT` for a source that writes its own repaired copy (the input is never written).
struct RepairRequest {
  std::string path;
  std::string output;  // a new folder
  bool refresh_fp32 = false;
  bool reset_optimizer = false;
  bool drop_optimizer = false;
  std::vector<std::string>
      other_actions;  // the other actions asked for ("--reset-optimizer"): refused by name
  bool json = false;
  // The front end's progress (bytes copied, records rewritten) and cancel, checked between files, steps of a
  // few MiB and records: a cancelled repair throws Cancelled with nothing published. Null: neither.
  Progress* progress = nullptr;
};

// The model weights of a self-reporting source, as its export writes them (names, dtypes), produced lazily:
// nothing is read until a tensor's bytes are pulled (`ckptdoc diff`).
struct WeightTensors {
  std::string what;                        // "PyTorch Distributed Checkpoint /x/step-3 (weights)"
  std::vector<NamedTensor> tensors;        // export's names and order
  std::shared_ptr<const void> keep_alive;  // what the tensors read from (the opened checkpoint)
};

// The actions of a RepairRequest, as a front end offers them (one control each).
enum class RepairAction : uint8_t { RefreshFp32, ResetOptimizer, DropOptimizer };

struct Outcome {
  std::string text;   // what the command prints on stdout, as the request asked (text or JSON); may be empty
  int exit_code = 0;  // 0 ok, 1 problems found (diagnose)
};

struct ExportOutcome : Outcome {
  std::string path;
  size_t tensors = 0;
  // Written tensors holding NaN or Inf: the front end warns about them whatever --quiet says.
  std::vector<deepspeed::NonFiniteTensor> non_finite;
};

class Source {
 public:
  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  Source(Source&&) = delete;
  Source& operator=(Source&&) = delete;
  virtual ~Source() = default;

  virtual std::string_view name() const = 0;         // "dcp": stable, used in messages and tests
  virtual std::string_view description() const = 0;  // "a PyTorch Distributed Checkpoint"
  // Whether this source reads `path`: cheap (names, small headers), never tensor bytes, never throws.
  virtual bool probe(const std::string& path) const = 0;
  virtual bool can(Command command) const = 0;
  // Opened as deepspeed::Checkpoint (the catalog) by the commands themselves; the operations below are then
  // not used.
  virtual bool reads_into_catalog() const { return false; }
  // Whether `repair` goes to repair() below: every self-reporting source, and a source the catalog reads
  // whose repairs are not DeepSpeed's (a Trainer folder's optimizer.pt).
  virtual bool repairs_itself() const { return !reads_into_catalog(); }
  // Whether export_weights writes torch.save output when asked (ExportRequest::torch); else the CLI refuses
  // `--format torch` for this source rather than have it ignored.
  virtual bool exports_torch() const { return false; }

  // A self-reporting source's operations; each refuses (refusal()) unless overridden.
  virtual Outcome inspect(const InspectRequest& request) const;
  virtual Outcome diagnose(const DiagnoseRequest& request) const;
  virtual ExportOutcome export_weights(const ExportRequest& request) const;
  virtual Outcome repair(const RepairRequest& request) const;
  // Why repair() refuses `action` on `path` whatever else is asked (request_text marks), for the views to
  // leave that control off and say why; nullopt: not refused up front (repair() may still refuse the
  // request as a whole). Cheap (file names), never throws.
  virtual std::optional<std::string> repair_refusal(RepairAction /*action*/,
                                                    const std::string& /*path*/) const {
    return std::nullopt;
  }
  // Diff: the weights export_weights would write, unread.
  virtual WeightTensors weight_tensors(const std::string& path) const;
  // Diff --what exp_avg / exp_avg_sq: that Adam moment of each param, named as weight_tensors names the
  // param, unread.
  virtual WeightTensors moment_tensors(const std::string& path, const std::string& moment) const;

  // What the views show of a self-reporting source (storage_map.h), through the session: its storage map from
  // the metadata alone, and its diagnosis (diagnose's findings and verdict). nullopt: a source read into the
  // catalog, which the views show through it.
  virtual std::optional<StorageMap> storage_map(const std::string& /*path*/) const { return std::nullopt; }
  virtual std::optional<SourceDiagnosis> diagnosis(const std::string& /*path*/) const { return std::nullopt; }
  // The same with diagnose's options (DiagnoseRequest's verify_checksums and progress; json is not used):
  // what the session's analysis asks. By default the diagnosis of the path alone.
  virtual std::optional<SourceDiagnosis> diagnosis_for(const DiagnoseRequest& request) const {
    return diagnosis(request.path);
  }

  // "`inspect`, `diagnose` and `export`": the commands can() allows, in Command order.
  std::string supported_commands() const;
  // Unsupported, naming the source, `command` (when known) and the commands it supports.
  Error refusal(const std::string& path, std::optional<Command> command) const;
};

// What a finding's Fix asks of a source's own repair (the views' repair of a source that repairs itself):
// the action the finding's table repair (`kind`) names, to tick when `source` takes it on `path`; otherwise
// why that fix does not apply here (request_text marks), for the view to say so plainly rather than open
// with nothing ticked: the source's refusal of the action on this folder (repair_refusal), or that its
// repair has no such action (re-partitioning and restoring ZeRO-3 model files are DeepSpeed's). Both unset
// for a finding without a repair. Cheap, never throws.
struct FindingRepair {
  std::optional<RepairAction> action;
  std::optional<std::string> refused;
};
FindingRepair finding_repair(const Source& source, model::RepairKind kind, const std::string& path);

}  // namespace ckptdoc::sources
