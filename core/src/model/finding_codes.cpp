#include "ckptdoc/model/finding_codes.h"

#include <array>

#include "ckptdoc/error.h"

namespace ckptdoc::model {

namespace {

// Grouped by the source that reports them; `doc` is where README.md or docs/reference.md explains the code.
constexpr auto kCodes = std::to_array<CodeInfo>({
    {Code::Fp32MasterMismatch, "fp32-master-mismatch", Severity::Error, RepairKind::RefreshFp32,
     "README.md#diagnosis"},
    {Code::Fp32MasterDrift, "fp32-master-drift", Severity::Warning, RepairKind::RefreshFp32,
     "README.md#diagnosis"},
    {Code::NonfiniteValues, "nonfinite-values", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::MastersIn16Bit, "masters-in-16-bit", Severity::Info, RepairKind::None, "README.md#diagnosis"},
    {Code::MomentsFlushedOnResume, "moments-flushed-on-resume", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::OptimizerStateMissing, "optimizer-state-missing", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::OptimizerStateEmpty, "optimizer-state-empty", Severity::Info, RepairKind::None,
     "README.md#diagnosis"},
    {Code::OptimizerStateFresh, "optimizer-state-fresh", Severity::Info, RepairKind::None,
     "README.md#diagnosis"},
    {Code::NewParamsZeroMoments, "new-params-zero-moments", Severity::Warning, RepairKind::ResetOptimizer,
     "README.md#diagnosis"},
    {Code::OptimizerStepInconsistent, "optimizer-step-inconsistent", Severity::Error,
     RepairKind::ResetOptimizer, "README.md#diagnosis"},
    {Code::LossScaleCollapsed, "loss-scale-collapsed", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::NotAnalysed, "not-analysed", Severity::Warning, RepairKind::None, "README.md#diagnosis"},
    {Code::ChecksumMismatch, "checksum-mismatch", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::LpSourceMismatch, "lp-source-mismatch", Severity::Error, RepairKind::RefreshFp32,
     "README.md#diagnosis"},
    {Code::LpSourceIncomplete, "lp-source-incomplete", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::LpSourceCompared, "lp-source-compared", Severity::Info, RepairKind::None, "README.md#diagnosis"},
    {Code::TpRulesUnknown, "tp-rules-unknown", Severity::Info, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::TpReplicatedMismatch, "tp-replicated-mismatch", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::TpRulesInvalid, "tp-rules-invalid", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::RankFileMissing, "rank-file-missing", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::RankFileTruncated, "rank-file-truncated", Severity::Error, RepairKind::None,
     "README.md#diagnosis"},
    {Code::RankFileUnreadable, "rank-file-unreadable", Severity::Error, RepairKind::None,
     "README.md#diagnosis"},
    {Code::RankFileRenamed, "rank-file-renamed", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::ModelFileMissing, "model-file-missing", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::UnknownSchema, "unknown-schema", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::WorldSizeMismatch, "world-size-mismatch", Severity::Error, RepairKind::Repartition,
     "README.md#diagnosis"},
    {Code::ShapeMismatch, "shape-mismatch", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::LayoutMismatch, "layout-mismatch", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::LegacyParamShapes, "legacy-param-shapes", Severity::Info, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::RoundRobinOrder, "round-robin-order", Severity::Info, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::OptimizerStateIncomplete, "optimizer-state-incomplete", Severity::Error, RepairKind::None,
     "README.md#diagnosis"},
    {Code::OptimizerStateShapeMismatch, "optimizer-state-shape-mismatch", Severity::Error,
     RepairKind::ResetOptimizer, "README.md#diagnosis"},
    {Code::OptimizerStateNotSaved, "optimizer-state-not-saved", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::Zero3ModelFilesNotSaved, "zero3-model-files-not-saved", Severity::Error,
     RepairKind::RestoreModelFiles, "README.md#diagnosis"},
    {Code::UnsafePickle, "unsafe-pickle", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::OpenedCheckpointBelow, "opened-checkpoint-below", Severity::Info, RepairKind::None,
     "README.md#diagnosis"},
    {Code::LayoutNotAnalysed, "layout-not-analysed", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::LayoutUnsupported, "layout-unsupported", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::ParamMappingUnknown, "param-mapping-unknown", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::NvmeOffloadNotRead, "nvme-offload-not-read", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::SequenceParallel, "sequence-parallel", Severity::Info, RepairKind::None, "README.md#diagnosis"},
    {Code::SequenceParallelFileNames, "sequence-parallel-file-names", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::AutoepLayout, "autoep-layout", Severity::Info, RepairKind::None, "README.md#diagnosis"},
    {Code::LayerFileMissing, "layer-file-missing", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::TopologyMismatch, "topology-mismatch", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::TpShapeMismatch, "tp-shape-mismatch", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::TpDtypeMismatch, "tp-dtype-mismatch", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::ExpertFileMissing, "expert-file-missing", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::ExpertFileDuplicated, "expert-file-duplicated", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::ExpertCountMismatch, "expert-count-mismatch", Severity::Error, RepairKind::None,
     "README.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::ExpertSliceMappings, "expert-slice-mappings", Severity::Info, RepairKind::None,
     "docs/reference.md#tensor--pipeline--and-expert-parallel-checkpoints"},
    {Code::UniversalParamMissing, "universal-param-missing", Severity::Error, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalExtraParams, "universal-extra-params", Severity::Info, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalStepMissing, "universal-step-missing", Severity::Error, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalLoaderVersions, "universal-loader-versions", Severity::Info, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalIterationMismatch, "universal-iteration-mismatch", Severity::Warning, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalModuleNotLoaded, "universal-module-not-loaded", Severity::Info, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalCheckpointBeside, "universal-checkpoint-beside", Severity::Info, RepairKind::None,
     "docs/reference.md#reading-universal-checkpoints"},
    {Code::UniversalTensorParallel, "universal-tensor-parallel", Severity::Info, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::ConfigUnreadable, "config-unreadable", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::IndexMissing, "index-missing", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::IndexUnreadable, "index-unreadable", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::IndexShardMissing, "index-shard-missing", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::IndexTensorMissing, "index-tensor-missing", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::IndexTotalMismatch, "index-total-mismatch", Severity::Warning, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::ShardUnindexed, "shard-unindexed", Severity::Warning, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::ShardTensorUnindexed, "shard-tensor-unindexed", Severity::Warning, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::ShardUnreadable, "shard-unreadable", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::TensorDuplicated, "tensor-duplicated", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::NonTensorEntries, "non-tensor-entries", Severity::Info, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::PlaceholderTensor, "placeholder-tensor", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::MixedDtypes, "mixed-dtypes", Severity::Warning, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::AllZeroWeights, "all-zero-weights", Severity::Warning, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
    {Code::GradientsNotRecorded, "gradients-not-recorded", Severity::Info, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::GradientNonfinite, "gradient-nonfinite", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::GradientNormNonfinite, "gradient-norm-nonfinite", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::GradientNormFarAboveClip, "gradient-norm-far-above-clip", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::GradientNormZero, "gradient-norm-zero", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::LossScaleAtFloor, "loss-scale-at-floor", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::LastStepOverflow, "last-step-overflow", Severity::Info, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::LossScaleCollapse, "loss-scale-collapse", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::StepsSkipped, "steps-skipped", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::GradientNormSpike, "gradient-norm-spike", Severity::Warning, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpChunkGap, "dcp-chunk-gap", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::DcpChunkOverlap, "dcp-chunk-overlap", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpChunkOutside, "dcp-chunk-outside", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpFileMissing, "dcp-file-missing", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::DcpFileTruncated, "dcp-file-truncated", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpItemMissing, "dcp-item-missing", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::DcpItemUnreadable, "dcp-item-unreadable", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpItemCrcMismatch, "dcp-item-crc-mismatch", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpItemMismatch, "dcp-item-mismatch", Severity::Error, RepairKind::None,
     "docs/reference.md#other-finding-codes"},
    {Code::DcpItemUnreferenced, "dcp-item-unreferenced", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::DcpNonFinite, "dcp-non-finite", Severity::Error, RepairKind::None, "README.md#diagnosis"},
    {Code::DcpAdamStepMismatch, "dcp-adam-step-mismatch", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::DcpMomentsLost, "dcp-moments-lost", Severity::Error, RepairKind::ResetOptimizer,
     "README.md#diagnosis"},
    {Code::DcpMomentsNegative, "dcp-moments-negative", Severity::Error, RepairKind::ResetOptimizer,
     "README.md#diagnosis"},
    {Code::DcpReplicaMismatch, "dcp-replica-mismatch", Severity::Error, RepairKind::None,
     "README.md#diagnosis"},
    {Code::AcceleratePartUnreadable, "accelerate-part-unreadable", Severity::Error, RepairKind::None,
     "README.md#diagnosis"},
    {Code::AccelerateOptimizerMissing, "accelerate-optimizer-missing", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::AccelerateOptimizerParamUnknown, "accelerate-optimizer-param-unknown", Severity::Warning,
     RepairKind::None, "README.md#diagnosis"},
    {Code::MegatronCommonMissing, "megatron-common-missing", Severity::Error, RepairKind::None,
     "README.md#diagnosis"},
    {Code::MegatronCommonUnreadable, "megatron-common-unreadable", Severity::Error, RepairKind::None,
     "docs/reference.md#megatron-core-folders"},
    {Code::MegatronIterationMismatch, "megatron-iteration-mismatch", Severity::Warning, RepairKind::None,
     "README.md#diagnosis"},
    {Code::MegatronIntegrityMismatch, "megatron-integrity-mismatch", Severity::Error, RepairKind::None,
     "docs/reference.md#megatron-core-folders"},
    {Code::MegatronIntegrityMissing, "megatron-integrity-missing", Severity::Error, RepairKind::None,
     "docs/reference.md#megatron-core-folders"},
    {Code::MegatronIntegrityUnlisted, "megatron-integrity-unlisted", Severity::Warning, RepairKind::None,
     "docs/reference.md#megatron-core-folders"},
    {Code::MegatronIntegrityUnreadable, "megatron-integrity-unreadable", Severity::Error, RepairKind::None,
     "docs/reference.md#megatron-core-folders"},
    {Code::OptimizerFileUnreadable, "optimizer-file-unreadable", Severity::Error, RepairKind::None,
     "README.md#hugging-face-folders-weights-files-and-trainer-checkpoints-as-inputs"},
});

// The rows are in Code's order, so info() indexes the table.
constexpr bool in_enum_order() {
  for (size_t i = 0; i < kCodes.size(); ++i)
    if (static_cast<size_t>(kCodes[i].code) != i) return false;
  return true;
}
static_assert(in_enum_order(), "kCodes must list every Code in the enum's order");

}  // namespace

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::Error:
      return "error";
    case Severity::Warning:
      return "warning";
    default:
      return "info";
  }
}

Severity severity_of(std::string_view name) {
  if (name == "error") return Severity::Error;
  if (name == "warning") return Severity::Warning;
  return Severity::Info;
}

std::string_view repair_name(RepairKind r) {
  switch (r) {
    case RepairKind::RefreshFp32:
      return "refresh-fp32";
    case RepairKind::ResetOptimizer:
      return "reset-optimizer";
    case RepairKind::DropOptimizer:
      return "drop-optimizer";
    case RepairKind::Repartition:
      return "repartition";
    case RepairKind::RestoreModelFiles:
      return "restore-model-files";
    default:
      return "";
  }
}

std::span<const CodeInfo> all_codes() {
  return kCodes;
}

const CodeInfo& info(Code c) {
  return kCodes.at(static_cast<size_t>(c));
}

std::string code_name(Code c) {
  return std::string(info(c).name);
}

Severity default_severity(Code c) {
  return info(c).severity;
}

RepairKind default_repair(Code c) {
  return info(c).repair;
}

std::optional<Code> find_code(std::string_view name) {
  for (const auto& row : kCodes)
    if (row.name == name) return row.code;
  return std::nullopt;
}

Code code_of(std::string_view name) {
  if (auto c = find_code(name)) return *c;
  throw Error(ErrorKind::InvalidRequest, "", "",
              "unknown finding code '" + std::string(name) + "': add it to model/finding_codes.cpp");
}

}  // namespace ckptdoc::model
