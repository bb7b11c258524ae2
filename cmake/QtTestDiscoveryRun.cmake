# Runs a Qt Test executable with -functions and writes one add_test() per test function.
# "cmake -E env" rather than ENV_MODIFICATION, which needs CMake 3.27 (the project requires 3.25).
execute_process(COMMAND ${CMAKE_COMMAND} -E env QT_QPA_PLATFORM=offscreen ${EXE} -functions
                OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} -functions failed (${rc}): ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(content "")
foreach(line IN LISTS lines)
  string(STRIP "${line}" fn)
  string(REGEX REPLACE "\\(\\)$" "" fn "${fn}")
  if(fn STREQUAL "")
    continue()
  endif()
  string(APPEND content "add_test([=[${TARGET}.${fn}]=] [=[${EXE}]=] [=[${fn}]=])\n")
  string(APPEND content "set_tests_properties([=[${TARGET}.${fn}]=] PROPERTIES ENVIRONMENT [=[${ENV}]=] LABELS [=[${LABELS}]=] TIMEOUT 600)\n")
endforeach()
file(WRITE ${OUT} "${content}")
