# ckptdoc_add_qtest(target sources...): a Qt Test executable whose every test function becomes its own
# ctest entry ("target.function"), discovered after each build by running "target -functions".
function(ckptdoc_add_qtest target)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} Qt6::Test)
  set_target_properties(${target} PROPERTIES AUTOMOC ON)
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  set(env "QT_QPA_PLATFORM=offscreen;CKPTDOC_SOURCE_DIR=${PROJECT_SOURCE_DIR};CKPTDOC_BINARY_DIR=${PROJECT_BINARY_DIR};CKPTDOC_CLI=$<TARGET_FILE:ckptdoc>;${ARG_ENV}")
  # The environment goes through a generated file: $<TARGET_FILE:ckptdoc> in the POST_BUILD command itself
  # would make every test executable depend on (and build) the CLI.
  set(env_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_env.txt")
  file(GENERATE OUTPUT ${env_file} CONTENT "${env}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D EXE=$<TARGET_FILE:${target}> -D TARGET=${target} -D OUT=${ctest_file}
            "-D ENV_FILE=${env_file}" "-D LABELS=${ARG_LABELS}" -P ${PROJECT_SOURCE_DIR}/cmake/QtTestDiscoveryRun.cmake
    VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${ctest_file})
endfunction()
