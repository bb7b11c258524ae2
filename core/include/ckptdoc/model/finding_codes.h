#pragma once
// The one table of finding codes (#27): every code a diagnosis reports, with its default severity, the repair
// that fixes it and where the user's guide documents it. Every source (DeepSpeed catalog, analysis rules,
// weights files, live snapshots, DCP, Accelerate, Megatron) names its findings through `Code`, so a code is
// spelled once and a new one cannot skip the table (tests/core/test_finding_codes.cpp). Qt-free, no deps.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ckptdoc::model {

enum class Severity : uint8_t { Info, Warning, Error };
std::string_view severity_name(Severity s);  // "info" | "warning" | "error"
// "error" | "warning" | anything else (info).
Severity severity_of(std::string_view name);

// Which repair (if any) fixes a finding, so front ends can offer a Fix button.
enum class RepairKind : uint8_t {
  None,
  RefreshFp32,
  ResetOptimizer,
  DropOptimizer,
  Repartition,
  RestoreModelFiles
};
// "", "refresh-fp32", "reset-optimizer", "drop-optimizer", "repartition", "restore-model-files"
std::string_view repair_name(RepairKind r);

// Every finding code, in the table's order (finding_codes.cpp).
enum class Code : uint8_t {
  Fp32MasterMismatch,
  Fp32MasterDrift,
  NonfiniteValues,
  MastersIn16Bit,
  MomentsFlushedOnResume,
  OptimizerStateMissing,
  OptimizerStateEmpty,
  OptimizerStateFresh,
  NewParamsZeroMoments,
  OptimizerStepInconsistent,
  LossScaleCollapsed,
  NotAnalysed,
  ChecksumMismatch,
  LpSourceMismatch,
  LpSourceIncomplete,
  LpSourceCompared,
  TpRulesUnknown,
  TpReplicatedMismatch,
  TpRulesInvalid,
  RankFileMissing,
  RankFileTruncated,
  RankFileUnreadable,
  RankFileRenamed,
  ModelFileMissing,
  UnknownSchema,
  WorldSizeMismatch,
  ShapeMismatch,
  LayoutMismatch,
  LegacyParamShapes,
  RoundRobinOrder,
  OptimizerStateIncomplete,
  OptimizerStateShapeMismatch,
  OptimizerStateNotSaved,
  Zero3ModelFilesNotSaved,
  UnsafePickle,
  OpenedCheckpointBelow,
  LayoutNotAnalysed,
  LayoutUnsupported,
  ParamMappingUnknown,
  NvmeOffloadNotRead,
  SequenceParallel,
  SequenceParallelFileNames,
  AutoepLayout,
  LayerFileMissing,
  TopologyMismatch,
  TpShapeMismatch,
  TpDtypeMismatch,
  ExpertFileMissing,
  ExpertFileDuplicated,
  ExpertCountMismatch,
  ExpertSliceMappings,
  UniversalParamMissing,
  UniversalExtraParams,
  UniversalStepMissing,
  UniversalLoaderVersions,
  UniversalIterationMismatch,
  UniversalModuleNotLoaded,
  UniversalCheckpointBeside,
  UniversalTensorParallel,
  ConfigUnreadable,
  IndexMissing,
  IndexUnreadable,
  IndexShardMissing,
  IndexTensorMissing,
  IndexTotalMismatch,
  ShardUnindexed,
  ShardTensorUnindexed,
  ShardUnreadable,
  TensorDuplicated,
  NonTensorEntries,
  PlaceholderTensor,
  MixedDtypes,
  AllZeroWeights,
  GradientsNotRecorded,
  GradientNonfinite,
  GradientNormNonfinite,
  GradientNormFarAboveClip,
  GradientNormZero,
  LossScaleAtFloor,
  LastStepOverflow,
  LossScaleCollapse,
  StepsSkipped,
  GradientNormSpike,
  DcpChunkGap,
  DcpChunkOverlap,
  DcpChunkOutside,
  DcpFileMissing,
  DcpFileTruncated,
  DcpItemMissing,
  DcpItemUnreadable,
  DcpItemCrcMismatch,
  DcpItemMismatch,
  DcpItemUnreferenced,
  DcpNonFinite,
  DcpAdamStepMismatch,
  DcpMomentsLost,
  DcpMomentsNegative,
  DcpReplicaMismatch,
  AcceleratePartUnreadable,
  AccelerateOptimizerMissing,
  AccelerateOptimizerParamUnknown,
  MegatronCommonMissing,
  MegatronCommonUnreadable,
  MegatronIterationMismatch,
  MegatronIntegrityMismatch,
  MegatronIntegrityMissing,
  MegatronIntegrityUnlisted,
  MegatronIntegrityUnreadable,
  OptimizerFileUnreadable,
};

struct CodeInfo {
  Code code;
  std::string_view name;  // the stable string JSON and text carry, e.g. "fp32-master-mismatch"
  Severity severity;      // what a site reports unless it says why not
  RepairKind repair;      // the repair that fixes it (None: no repair does)
  std::string_view doc;   // "README.md#diagnosis": the file and heading that document it
};

std::span<const CodeInfo> all_codes();
const CodeInfo& info(Code c);
std::string code_name(Code c);  // info(c).name as the std::string findings hold
Severity default_severity(Code c);
RepairKind default_repair(Code c);
// The code named `name`; nullopt when the table has none.
std::optional<Code> find_code(std::string_view name);
// The code named `name`; throws Error (ErrorKind::InvalidRequest) naming it when the table has none.
Code code_of(std::string_view name);

}  // namespace ckptdoc::model
