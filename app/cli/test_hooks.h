#pragma once
// TEST SCAFFOLDING for the CLI, kept out of the commands: in builds configured with CKPTDOC_TEST_HOOKS (the
// default for development and CI), the environment variable CKPTDOC_FAULT makes the N-th file-system call
// fail or kill the process (tests/interop/test_fault_kill.cpp), and CKPTDOC_CUT_FILE truncates a chosen file
// at a chosen touch of it (mapping, or a range read) (tests/interop/test_changed_while_read.cpp). Other
// builds compile this to nothing.

namespace ckptdoc::cli {

void install_test_hooks();

}  // namespace ckptdoc::cli
