# Runs one compile-fail check: compiles SOURCE with the host C++ compiler and DEFINE.
#   cmake -DCOMPILER=... -DSOURCE=... -DINCLUDE=... -DDEFINE=AD_SWAP_X|none -DEXPECT=fail|pass
#         [-DPATTERN=regex] -P run_compile_fail.cmake
# EXPECT=fail passes only when the compiler rejects the file and its diagnostic matches
# PATTERN (so an unrelated error cannot pass the test); EXPECT=pass is the control.
set(args -std=c++20 -fsyntax-only -I${INCLUDE} ${SOURCE})
if(NOT DEFINE STREQUAL "none")
  list(APPEND args -D${DEFINE})
endif()
execute_process(COMMAND ${COMPILER} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "pass")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "control compile failed (rc ${rc}):\n${err}")
  endif()
  message(STATUS "control compiles")
else()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${DEFINE}: compiled, but a K/V role swap must not compile")
  endif()
  if(DEFINED PATTERN AND NOT err MATCHES "${PATTERN}")
    message(FATAL_ERROR "${DEFINE}: failed to compile, but not for the role swap:\n${err}")
  endif()
  string(REGEX MATCH "error:[^\n]*" first_error "${err}")
  message(STATUS "${DEFINE} rejected as expected: ${first_error}")
endif()
