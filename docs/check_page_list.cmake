# Test docs_pages_listed (docs/CMakeLists.txt): every page of docs/ is in the INPUT list of
# Doxyfile.in, which gives the site its reading order; a page missing there would not be on the site.
# Run as: cmake -DDOCS_DIR=<docs> -P check_page_list.cmake
file(GLOB _pages RELATIVE "${DOCS_DIR}" "${DOCS_DIR}/*.md")
file(READ "${DOCS_DIR}/Doxyfile.in" _doxyfile)
set(_missing "")
foreach(_page IN LISTS _pages)
  string(FIND "${_doxyfile}" "@PROJECT_SOURCE_DIR@/docs/${_page} " _at)
  if(_at EQUAL -1)
    list(APPEND _missing "${_page}")
  endif()
endforeach()
list(LENGTH _pages _count)
if(_missing)
  string(REPLACE ";" ", " _missing "${_missing}")
  message(FATAL_ERROR "docs/Doxyfile.in: INPUT lacks ${_missing}: add each where it belongs in the reading order")
endif()
message(STATUS "${_count} pages of docs/, each in the INPUT list of docs/Doxyfile.in")
