# Folders are layers, and the compiler enforces it.
#
# loom_layer(NAME SOURCES... DEPENDS layers...) makes the object library
# loom_NAME from the folder NAME/. Its include path is not the project root but
# a view of it, ${PROJECT_BINARY_DIR}/layers/NAME, holding one link per folder
# it may see: its own and those of the layers it depends on, transitively, plus
# the public include/. An include of a layer above (or beside) it names a path
# the view lacks and fails to compile. tests/layering_test.py checks the rest:
# no include into another layer's internals, no "..", no cycle.
#
# A layer's subfolders are its internals unless it EXPORTS them (base exports
# net/, shm/ and device/; comm its engine/). Targets above libloom (training,
# tools) get a view of their own with loom_layer_view.
#
# Every layer and view also goes to layers.txt in the build folder, which the
# layering test reads, so the graph is written down once, here:
#   layer NAME: DEPENDS... | EXPORTS...
#   view NAME: FOLDERS...

set(LOOM_LAYERS_FILE ${PROJECT_BINARY_DIR}/layers.txt)
file(WRITE ${LOOM_LAYERS_FILE} "")

# The layers NAME may see: itself and its dependencies' closures.
function(loom_layer_closure name out)
  set(seen ${name})
  get_property(deps GLOBAL PROPERTY LOOM_LAYER_DEPENDS_${name})
  foreach(dep IN LISTS deps)
    get_property(dep_closure GLOBAL PROPERTY LOOM_LAYER_CLOSURE_${dep})
    list(APPEND seen ${dep_closure})
  endforeach()
  list(REMOVE_DUPLICATES seen)
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# The include folder of a target that may see LAYERS (folder names).
function(loom_layer_view view_name out)
  loom_make_view(${view_name} view ${ARGN})
  string(REPLACE ";" " " folders "${ARGN}")
  file(APPEND ${LOOM_LAYERS_FILE} "view ${view_name}: ${folders}\n")
  set(${out} ${view} PARENT_SCOPE)
endfunction()

function(loom_make_view view_name out)
  set(view ${PROJECT_BINARY_DIR}/layers/${view_name})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  foreach(layer IN LISTS ARGN)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${view}/${layer} SYMBOLIC)
  endforeach()
  set(${out} ${view} PARENT_SCOPE)
endfunction()

function(loom_layer name)
  cmake_parse_arguments(LAYER "" "" "SOURCES;DEPENDS;EXPORTS" ${ARGN})
  foreach(dep IN LISTS LAYER_DEPENDS)
    if(NOT TARGET loom_${dep})
      message(FATAL_ERROR "layer ${name} depends on ${dep}, which is not defined below it")
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY LOOM_LAYER_DEPENDS_${name} ${LAYER_DEPENDS})
  loom_layer_closure(${name} closure)
  set_property(GLOBAL PROPERTY LOOM_LAYER_CLOSURE_${name} ${closure})
  loom_make_view(${name} view ${closure})
  string(REPLACE ";" " " deps "${LAYER_DEPENDS}")
  string(REPLACE ";" " " exports "${LAYER_EXPORTS}")
  file(APPEND ${LOOM_LAYERS_FILE} "layer ${name}: ${deps} | ${exports}\n")

  add_library(loom_${name} OBJECT ${LAYER_SOURCES})
  target_include_directories(loom_${name} PRIVATE ${view} ${PROJECT_SOURCE_DIR}/include)
  foreach(dep IN LISTS LAYER_DEPENDS)
    target_link_libraries(loom_${name} PRIVATE loom_${dep})
  endforeach()
  target_link_libraries(loom_${name} PRIVATE loom_warnings)
  loom_unity(loom_${name})
  loom_lto_objects(loom_${name})
endfunction()
