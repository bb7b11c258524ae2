// libFuzzer harness: a PyTorch Distributed Checkpoint folder whose `.metadata` is arbitrary bytes beside real
// `.distcp` files (CKPTDOC_FUZZ_DCP_FOLDER, copied once: tests/fixtures/dcp/fsdp2_ws2 in run_fuzzers.sh),
// diagnosed as `ckptdoc diagnose` does through the sources registry: the metadata reader (torch's and
// megatron-core's classes, chunks, storage items, mcore_data), the tiling checks and every item read it
// names.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "ckptdoc/error.h"
#include "ckptdoc/sources/registry.h"
#include "ckptdoc/sources/source.h"
#include "fuzz_temp_folder.h"

namespace fs = std::filesystem;

namespace {

std::string make_folder() {
  std::string dir = (fs::temp_directory_path() / ("ckptdoc-fuzz-dcp-" + std::to_string(::getpid()))).string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  const char* from = std::getenv("CKPTDOC_FUZZ_DCP_FOLDER");
  if (from && *from) {  // unset or empty: a folder with the .metadata alone
    for (const auto& e : fs::directory_iterator(from, ec))
      if (e.path().extension() == ".distcp")
        fs::copy_file(e.path(), dir + "/" + e.path().filename().string(), ec);
    if (ec) {
      std::fprintf(stderr, "CKPTDOC_FUZZ_DCP_FOLDER %s: %s\n", from, ec.message().c_str());
      std::exit(2);  // a setup mistake, not a finding: no crash report
    }
  }
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ckptdoc::fuzz::TempFolder folder{make_folder()};
  const std::string& dir = folder.path;
  if (FILE* f = std::fopen((dir + "/.metadata").c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    const auto source = ckptdoc::sources::find_source(dir);
    ckptdoc::sources::DiagnoseRequest request;
    request.path = dir;
    request.json = true;
    (void)source->diagnose(request);
  } catch (const ckptdoc::Error&) {
  }
  return 0;
}
