// libFuzzer harness: the DeepSpeed catalog over a folder whose rank file is the fuzzed bytes (the model file
// is a real fixture's), then a diagnosis of whatever the catalog accepted.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "ckptdoc/analysis/diagnose.h"
#include "ckptdoc/error.h"
#include "ckptdoc/sources/deepspeed/checkpoint.h"
#include "ckptdoc/sources/deepspeed/diagnose.h"
#include "fuzz_temp_folder.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ckptdoc::fuzz::TempFolder folder{[] {
    std::string d = (fs::temp_directory_path() / ("ckptdoc-fuzz-ds-" + std::to_string(::getpid()))).string();
    fs::create_directories(d + "/global_step1");
    if (FILE* f = std::fopen((d + "/latest").c_str(), "wb")) {
      std::fputs("global_step1", f);
      std::fclose(f);
    }
    const char* model = std::getenv("CKPTDOC_FUZZ_MODEL_FILE");
    if (model && *model) {  // unset or empty: the harness fuzzes without a model file
      std::error_code ec;
      fs::copy_file(model, d + "/global_step1/mp_rank_00_model_states.pt",
                    fs::copy_options::overwrite_existing, ec);
      if (ec) {
        std::fprintf(stderr, "CKPTDOC_FUZZ_MODEL_FILE %s: %s\n", model, ec.message().c_str());
        std::exit(2);  // a setup mistake, not a finding: no crash report
      }
    }
    return d;
  }()};
  const std::string& dir = folder.path;
  if (FILE* f = std::fopen((dir + "/global_step1/zero_pp_rank_0_mp_rank_00_optim_states.pt").c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    auto ckpt = ckptdoc::deepspeed::Checkpoint::open(dir);
    ckptdoc::analysis::DiagnoseOptions o;
    o.device = ckptdoc::DeviceKind::Cpu;
    o.threads = 1;
    o.verify_checksums = true;  // every record's CRC-32 too: walks each zip entry's bytes
    (void)ckptdoc::deepspeed::diagnose(*ckpt, o);
  } catch (const ckptdoc::Error&) {
  }
  return 0;
}
