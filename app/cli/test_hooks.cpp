// Test scaffolding (see test_hooks.h).
#include "test_hooks.h"

#include <cstdio>
#include <string>

#include "ckptdoc/io/fault_injection.h"

namespace ckptdoc::cli {

void install_test_hooks() {
#ifdef CKPTDOC_TEST_HOOKS
  if (const std::string note = install_fault_injection_from_env(); !note.empty())
    std::fprintf(stderr, "ckptdoc: %s\n", note.c_str());
  if (const std::string note = install_file_cut_from_env(); !note.empty())
    std::fprintf(stderr, "ckptdoc: %s\n", note.c_str());
#endif
}

}  // namespace ckptdoc::cli
