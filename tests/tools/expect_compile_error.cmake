# Compiles SOURCE twice with the C++ compiler COMPILER (include folder ROOT): as it is, where it must
# compile, and with -D${DEFINE}, where it must fail with an error matching EXPECTED. So a test of
# what must not compile cannot pass because the file is broken for another reason.
# Usage: cmake -DCOMPILER=... -DROOT=... -DSOURCE=... -DDEFINE=... -DEXPECTED=regex -P expect_compile_error.cmake
set(flags -std=c++20 -fsyntax-only -I${ROOT} ${SOURCE})
execute_process(COMMAND ${COMPILER} ${flags} RESULT_VARIABLE ok_rc ERROR_VARIABLE ok_err)
if(NOT ok_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} does not compile even without ${DEFINE}:\n${ok_err}")
endif()
execute_process(COMMAND ${COMPILER} ${flags} -D${DEFINE} RESULT_VARIABLE bad_rc ERROR_VARIABLE bad_err)
if(bad_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiles with ${DEFINE}; it must not")
endif()
if(NOT bad_err MATCHES "${EXPECTED}")
  message(FATAL_ERROR "${SOURCE} fails with ${DEFINE}, but not with an error matching '${EXPECTED}':\n${bad_err}")
endif()
message(STATUS "${SOURCE}: compiles, and with ${DEFINE} fails as expected")
