# Fails when a public header declares an owner or view that the contract test does not list
# (docs/design.md, "The handle model"; tests/cpu/test_contract.cpp).
#
#   cmake -DHEADER_DIR=<dir with the public headers> -DLIST_FILE=<test_contract.cpp> -P check_contract_list.cmake
#
# What counts as declared, read line by line from HEADER_DIR/*.hpp (comments skipped):
#   - the type a `static X from_native_handle(` returns (an owner adopting a handle, or a view of one);
#   - the class around a `release()` member (an owner handing something off): the last class defined at
#     the start of a line before it.
# What counts as listed: every identifier between the lines `// contract:list-begin` and
# `// contract:list-end` of LIST_FILE. Each declared name must be listed; the message names the header.
cmake_minimum_required(VERSION 3.20)

foreach(_var HEADER_DIR LIST_FILE)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "check_contract_list.cmake: pass -D${_var}=...")
  endif()
endforeach()

# The listed identifiers.
file(READ "${LIST_FILE}" _list_text)
string(FIND "${_list_text}" "// contract:list-begin" _begin)
string(FIND "${_list_text}" "// contract:list-end" _end)
if(_begin EQUAL -1 OR _end EQUAL -1 OR _end LESS _begin)
  message(FATAL_ERROR "${LIST_FILE}: no '// contract:list-begin' ... '// contract:list-end' region")
endif()
math(EXPR _length "${_end} - ${_begin}")
string(SUBSTRING "${_list_text}" ${_begin} ${_length} _region)
string(REGEX MATCHALL "[A-Za-z_][A-Za-z_0-9]*" _listed "${_region}")
list(REMOVE_DUPLICATES _listed)

# The declared owners and views.
file(GLOB _headers "${HEADER_DIR}/*.hpp")
list(SORT _headers)
set(_missing "")
set(_declared_count 0)
foreach(_header IN LISTS _headers)
  get_filename_component(_name "${_header}" NAME)
  # One list element per line: semicolons and square brackets (which CMake's lists treat specially)
  # are replaced first.
  file(READ "${_header}" _text)
  string(REPLACE ";" "<semicolon>" _text "${_text}")
  string(REPLACE "[" "<lbracket>" _text "${_text}")
  string(REPLACE "]" "<rbracket>" _text "${_text}")
  string(REPLACE "\\" "<backslash>" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  set(_class "")
  set(_found "")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^[ \t]*//")
      continue()
    endif()
    # A class defined at the start of a line (not a forward declaration).
    if(NOT _line MATCHES "<semicolon>" AND _line MATCHES "^(class|struct) ([A-Za-z_][A-Za-z_0-9]*)")
      set(_class "${CMAKE_MATCH_2}")  # the last MATCHES sets CMAKE_MATCH_n
    endif()
    if(_line MATCHES "static (constexpr )?([A-Za-z_][A-Za-z_0-9]*)(<[^>]*>)? from_native_handle\\(")
      list(APPEND _found "${CMAKE_MATCH_2}")
    endif()
    if(_line MATCHES "[ *&]release\\(\\) (const )?noexcept" AND NOT _class STREQUAL "")
      list(APPEND _found "${_class}")
    endif()
  endforeach()
  if(_found)
    list(REMOVE_DUPLICATES _found)
  endif()
  foreach(_type IN LISTS _found)
    math(EXPR _declared_count "${_declared_count} + 1")
    list(FIND _listed "${_type}" _at)
    if(_at EQUAL -1)
      list(APPEND _missing "${_name}: ${_type}")
    endif()
  endforeach()
endforeach()

if(_missing)
  list(JOIN _missing "\n  " _text)
  message(FATAL_ERROR "owners or views declared in the public headers but missing from the list of "
                      "${LIST_FILE} (add one line each, or list the type as not an owner, with the reason):\n  ${_text}")
endif()
message(STATUS "contract list: all ${_declared_count} owners and views declared in ${HEADER_DIR} are listed")
