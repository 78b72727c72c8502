# Fails unless a 64-bit extent given to cudrv::dims is refused at compile time with an error that
# names dims::checked (docs/loading-and-launching.md): the compiler's output for the fixture must say
# the constructor is deleted and quote the declaration's line, which names dims::checked. The same
# fixture written with dims::checked (-DCUDRV_ACCEPTED) must compile: the control.
#   cmake -DCXX=<compiler> -DINCLUDE_DIR=<include> -DFIXTURE=<file.cpp> -P check_dims_diagnostic.cmake
if(NOT CXX OR NOT INCLUDE_DIR OR NOT FIXTURE)
  message(FATAL_ERROR "CXX, INCLUDE_DIR and FIXTURE must be set")
endif()
set(flags -std=c++20 -fsyntax-only "-I${INCLUDE_DIR}")
execute_process(COMMAND "${CXX}" ${flags} -DCUDRV_ACCEPTED "${FIXTURE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the control (dims::checked) does not compile (${rc}):\n${out}")
endif()
execute_process(COMMAND "${CXX}" ${flags} "${FIXTURE}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "a 64-bit extent compiled: cudrv::dims must refuse it")
endif()
if(NOT out MATCHES "deleted")
  message(FATAL_ERROR "the error does not say the constructor is deleted:\n${out}")
endif()
if(NOT out MATCHES "dims::checked")
  message(FATAL_ERROR "the error does not name dims::checked:\n${out}")
endif()
message(STATUS "a 64-bit extent is refused, and the error names dims::checked")
