#pragma once
// main() of a GUI test executable (QApplication), instead of QTEST_MAIN: see ckptdoc::test::exec_tests.
#include <QApplication>

#include "test_support.h"

#define CKPTDOC_TEST_MAIN_WIDGETS(TestObject)                 \
  int main(int argc, char** argv) {                           \
    QApplication app(argc, argv);                             \
    app.setAttribute(Qt::AA_Use96Dpi, true);                  \
    return ckptdoc::test::exec_tests<TestObject>(argc, argv); \
  }
