# Fails when <cudrv/cudrv.hpp> pulls in a heavy standard header (docs/design.md, "Header cost"). The check
# asks the compiler for the umbrella's dependency list (-M, preprocessing only: no timing, so a loaded CI
# machine cannot make it flaky) and refuses every header of the list below that appears in it. A public
# header that truly needs one of them stays out of the umbrella (opt-in, as nvtx.hpp and dlpack.hpp are),
# or the list changes together with design.md's figures.
#   cmake -DCXX=<compiler> -DINCLUDE_DIRS=<dir|dir|...> [-DHEADER=cudrv/cudrv.hpp] -P check_header_cost.cmake
if(NOT CXX OR NOT INCLUDE_DIRS)
  message(FATAL_ERROR "CXX and INCLUDE_DIRS must be set")
endif()
string(REPLACE "|" ";" INCLUDE_DIRS "${INCLUDE_DIRS}")
if(NOT HEADER)
  set(HEADER cudrv/cudrv.hpp)
endif()
# Each costs a noticeable share of the floor (g++ 12, C++20): <memory> ~0.1 s (shared_ptr and its atomics),
# <chrono> ~0.1 s (calendars, time zones, <sstream>), the iostreams, the containers and algorithms beyond
# <string> and <vector>.
set(heavy memory chrono sstream istream ostream iostream fstream iomanip locale functional algorithm
    map unordered_map set unordered_set list deque tuple variant any regex thread mutex condition_variable
    future atomic filesystem format complex valarray random bits/shared_ptr.h bits/unique_ptr.h)

set(flags -std=c++20 -M)
foreach(dir IN LISTS INCLUDE_DIRS)
  list(APPEND flags "-I${dir}")
endforeach()
# One folder per header and include path: the tests that run this script may run at the same time.
string(MD5 tag "${HEADER}|${INCLUDE_DIRS}")
string(SUBSTRING "${tag}" 0 12 tag)
get_filename_component(work "${CMAKE_CURRENT_BINARY_DIR}/header_cost_check_${tag}" ABSOLUTE)
file(MAKE_DIRECTORY "${work}")
file(WRITE "${work}/umbrella.cpp" "#include <${HEADER}>\n")
execute_process(COMMAND "${CXX}" ${flags} "${work}/umbrella.cpp" RESULT_VARIABLE rc OUTPUT_VARIABLE deps
                ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${CXX} -M <${HEADER}> failed (${rc}):\n${err}")
endif()
string(REGEX REPLACE "[ \t\r\n\\\\]+" ";" deps "${deps}")
set(found "")
set(count 0)
foreach(dep IN LISTS deps)
  if(dep MATCHES "/c\\+\\+/[^/]+/(.+)$")  # libstdc++ (.../c++/12/...) and libc++ (.../c++/v1/...)
    math(EXPR count "${count} + 1")
    list(FIND heavy "${CMAKE_MATCH_1}" at)
    if(NOT at EQUAL -1)
      list(APPEND found "<${CMAKE_MATCH_1}>")
    endif()
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no standard library header in the dependencies of <${HEADER}>; the compiler's output:\n${deps}")
endif()
if(found)
  list(JOIN found " " found)
  message(FATAL_ERROR "<${HEADER}> includes heavy standard headers: ${found}\n"
                      "Find the public header that pulls each (g++ -H) and keep it out (docs/design.md, \"Header cost\").")
endif()
message(STATUS "<${HEADER}> includes ${count} standard library headers, none of the heavy ones")
