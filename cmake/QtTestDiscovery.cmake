# ckptdoc_add_qtest(target SOURCES ... LIBS ... LABELS ... ENV ... [SKIP_REGEX re] [TIMEOUT s] [PCH_FROM t]): a Qt Test
# executable whose every test function becomes its own ctest entry ("target.function"), discovered after each build
# by running "target -functions". SKIP_REGEX: output that makes ctest report the entry as skipped (a QSKIP for a
# reason outside the code, such as a missing reference implementation). PCH_FROM: a target with the same compile
# flags whose precompiled header this one reuses.
function(ckptdoc_add_qtest target)
  cmake_parse_arguments(ARG "" "SKIP_REGEX;TIMEOUT;PCH_FROM" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} Qt6::Test)
  set_target_properties(${target} PROPERTIES AUTOMOC ON)
  if(ARG_PCH_FROM)  # a target compiled with the same flags whose precompiled header this one reuses
    target_precompile_headers(${target} REUSE_FROM ${ARG_PCH_FROM})
    # AUTOMOC's file is nearly empty: loading the header would cost more than it saves.
    set_source_files_properties(${CMAKE_CURRENT_BINARY_DIR}/${target}_autogen/mocs_compilation.cpp
                                TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endif()
  # The CLI path is spelled out rather than $<TARGET_FILE:ckptdoc>, which would make every test depend on the
  # CLI; tests that run it (interop) add that dependency themselves.
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  set(env "QT_QPA_PLATFORM=offscreen;CKPTDOC_SOURCE_DIR=${PROJECT_SOURCE_DIR};CKPTDOC_BINARY_DIR=${PROJECT_BINARY_DIR};CKPTDOC_CLI=${PROJECT_BINARY_DIR}/app/ckptdoc;${ARG_ENV}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXE=$<TARGET_FILE:${target}> -D TARGET=${target} -D OUT=${ctest_file}
            "-D ENV=${env}" "-D LABELS=${ARG_LABELS}" "-D SKIP_REGEX=${ARG_SKIP_REGEX}" "-D TIMEOUT=${ARG_TIMEOUT}" -P ${PROJECT_SOURCE_DIR}/cmake/QtTestDiscoveryRun.cmake
    VERBATIM)
  # Included only once the target is built: ctest then runs what was built (`ctest -R test_crc32` after building
  # test_crc32 alone) instead of stopping at the first test list not yet written.
  set(guard_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests_if_built.cmake")
  file(WRITE ${guard_file} "if(EXISTS \"${ctest_file}\")\n  include(\"${ctest_file}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${guard_file})
endfunction()
