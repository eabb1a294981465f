# Every header compiles on its own: for each header a generated source that includes only that
# header, compiled in an object library with the include roots and usage requirements of the target
# the header belongs to. A header that leans on what its includer happened to include first fails
# the build, naming the header. The object libraries are part of every build (ALL) and gathered
# under the target dpv_header_check.

add_custom_target(dpv_header_check)

# dpv_check_headers(NAME
#                   HEADERS paths relative to the project root
#                   [LINK targets whose include roots and requirements the headers need]
#                   [INCLUDE_ROOTS folders given to dpv_include_root, for targets that are executables]
#                   [LANGUAGE CXX|CUDA])
function(dpv_check_headers name)
  cmake_parse_arguments(arg "" "LANGUAGE" "HEADERS;LINK;INCLUDE_ROOTS" ${ARGN})
  if(NOT arg_LANGUAGE)
    set(arg_LANGUAGE CXX)
  endif()
  set(extension cpp)
  if(arg_LANGUAGE STREQUAL "CUDA")
    set(extension cu)
  endif()
  set(sources "")
  foreach(header ${arg_HEADERS})
    string(MAKE_C_IDENTIFIER ${header} stem)
    set(source ${CMAKE_CURRENT_BINARY_DIR}/header_check/${name}/${stem}.${extension})
    set(text "#include \"${header}\"  // alone: it must compile without anything before it\n")
    set(old_text "")
    if(EXISTS ${source})
      file(READ ${source} old_text)
    endif()
    if(NOT old_text STREQUAL text)  # written only when it changes, so a reconfigure rebuilds nothing
      file(WRITE ${source} "${text}")
    endif()
    list(APPEND sources ${source})
  endforeach()
  if(NOT sources)
    return()
  endif()
  set(target dpv_header_check_${name})
  add_library(${target} OBJECT ${sources})
  foreach(root ${arg_INCLUDE_ROOTS})
    dpv_include_root(${target} PRIVATE ${root})
  endforeach()
  target_link_libraries(${target} PRIVATE ${arg_LINK})
  add_dependencies(dpv_header_check ${target})
endfunction()

# dpv_headers_under(VAR FOLDER [EXCLUDE_FOLDERS f...] [EXCLUDE headers...]): the headers (.h) under
# FOLDER, recursively, as paths relative to the project root, without those in the excluded
# folders and the excluded headers.
function(dpv_headers_under var folder)
  cmake_parse_arguments(arg "" "" "EXCLUDE_FOLDERS;EXCLUDE;EXTENSIONS" ${ARGN})
  if(NOT arg_EXTENSIONS)
    set(arg_EXTENSIONS h)
  endif()
  set(globs "")
  foreach(ext ${arg_EXTENSIONS})
    list(APPEND globs ${PROJECT_SOURCE_DIR}/${folder}/*.${ext})
  endforeach()
  file(GLOB_RECURSE found CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR} ${globs})
  foreach(excluded ${arg_EXCLUDE_FOLDERS})
    list(FILTER found EXCLUDE REGEX "^${excluded}/")
  endforeach()
  if(arg_EXCLUDE)
    list(REMOVE_ITEM found ${arg_EXCLUDE})
  endif()
  list(SORT found)
  set(${var} ${found} PARENT_SCOPE)
endfunction()
